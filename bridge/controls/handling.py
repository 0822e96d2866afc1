"""How a control command is carried out: its handler and its pickers (`Handling`),
and the binding of every control command of a `Registry` to its own (`Handlers`).

`Handlers` checks the binding against the table when it is made, so neither can name
a command the other lacks, and two pickers never share a kind. A picker is declared
once, beside its handler, as a `Picker`: the kind its buttons carry back and what a
press does with the value. A handler that must know who asked (schedules: their
maker; who may change one) is `Personal`: it also gets the `Asker`, and a press it
refuses (`NotYours`) leaves its picker open for someone who may.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from bridge.controls.registry import Command, Registry
    from bridge.controls.target import Target
    from bridge.model import ChatRef, Op, Sender
    from bridge.options import BridgeOptions
    from bridge.store.base import Store

    Handler = Callable[[Target, str], Awaitable[list[Op]]]
    PersonalHandler = Callable[[Target, str, "Asker"], Awaitable[list[Op]]]


class NotYours(Exception):
    """A `Personal` picker's press by someone who may not make it; the message says so."""


@dataclass(frozen=True, slots=True)
class Asker:
    """Who ran a command or pressed a button, and where: what a `Personal` handler
    needs beyond its `Target`."""

    sender: Sender
    key: str
    chat: ChatRef
    store: Store
    options: BridgeOptions
    wall: Callable[[], float]


@dataclass(frozen=True, slots=True)
class Personal:
    """A handler that is told who asked."""

    handler: PersonalHandler


@dataclass(frozen=True, slots=True)
class Picker:
    """One kind of the bridge's pickers (`common.picker`): a press on one of its
    buttons calls `pressed` with the value the button carries."""

    kind: str
    pressed: Handler | Personal
    guarded: bool = False  # only the owner or an approver may press (what it does matters)


@dataclass(frozen=True, slots=True)
class Handling:
    """How a control command is carried out: its handler, and its pickers. A press
    on a picker waits for idle as its command does (`idle_only`)."""

    handler: Handler | Personal
    pickers: tuple[Picker, ...] = ()


class Handlers:
    """Each control command of `commands` bound to its `Handling`, by name; each
    picker by kind, with the command it belongs to."""

    def __init__(self, commands: Registry, bound: Mapping[str, Handling]) -> None:
        control = {c.name for c in commands.commands if c.action == "control"}
        if missing := sorted(control - set(bound)):
            raise ValueError(f"control commands without a handler: {missing}")
        if unknown := sorted(set(bound) - control):
            raise ValueError(f"handlers of no control command: {unknown}")
        self._commands = commands
        self._bound = dict(bound)
        self._pickers: dict[str, tuple[Command, Picker]] = {}
        for command in commands.commands:
            for picker in bound[command.name].pickers if command.name in bound else ():
                if picker.kind in self._pickers:
                    raise ValueError(f"picker kind {picker.kind!r} declared twice")
                self._pickers[picker.kind] = (command, picker)

    def handling(self, word: str) -> tuple[Command, Handling] | None:
        """The control command `word` names (or one of its aliases), and its handling."""
        command = self._commands.find(word)
        if command is None or command.name not in self._bound:
            return None
        return command, self._bound[command.name]

    def picker(self, kind: str) -> tuple[Command, Picker] | None:
        """The picker of `kind` and the command it belongs to."""
        return self._pickers.get(kind)

"""What a button press means, and the book of live button tokens.

Buttons carry opaque tokens from the injected factory, never option text
(Telegram allows 64 bytes of callback data). The book maps each live token to
its `Choice` and groups tokens by an owner key (``"stop:3"``, ``"dialog:<id>"``,
``"busy:<id>"``, ``"picker:<id>"``, ``"queued:<id>"``) so a whole message's buttons
retire at once. Invariants: a token is live in at most one owner; a retired token
never resolves again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Form


@dataclass(frozen=True)
class DialogChoice:
    """One answer to an agent dialog: a select option, yes/no, cancel, or [Answer]
    of an input/editor dialog (`form` set: the answer is typed, not chosen)."""

    request_id: str
    label: str
    value: str | None = None
    confirmed: bool | None = None
    cancelled: bool = False
    form: Form | None = None
    # With a prefix, the form is optional: a typed answer is sent as prefix + text, and
    # a press without one (no forms on this platform) sends `value` (approving.py).
    typed_prefix: str = ""


@dataclass(frozen=True)
class StopChoice:
    """The [Stop] button of the live status message."""


@dataclass(frozen=True)
class BusyChoice:
    """An answer to "the agent is busy": steer now or queue after this run."""

    mode: Literal["steer", "follow_up"]
    pending_id: str


@dataclass(frozen=True)
class PickerChoice:
    """A button of one of the bridge's pickers (/model, /fork, …): `value` of `kind`;
    `outcome` is what its picker says once it is pressed, in people's words (`value`
    is for the bridge: "revoke command:…", a session's file name)."""

    kind: str
    value: str
    picker_id: str
    outcome: str = ""


class PickerOption(NamedTuple):
    """One button of a picker: its label, the value a press carries back, and what the
    picker says once it is pressed (by default ✓ and the label)."""

    label: str
    value: str
    outcome: str = ""


QueueAction = Literal["steer_now", "cancel"]


@dataclass(frozen=True)
class QueueChoice:
    """[Steer now] or [Cancel] of a message waiting in the agent's queue (queued.py)."""

    entry_id: str
    action: QueueAction


Choice = DialogChoice | StopChoice | BusyChoice | PickerChoice | QueueChoice


class TokenBook:
    def __init__(self, factory: Callable[[], str], max_bytes: int) -> None:
        self._factory = factory
        self._max_bytes = max_bytes
        self._choices: dict[str, Choice] = {}
        self._owned: dict[str, list[str]] = {}

    def issue(self, owner: str, choice: Choice) -> str:
        token = self._factory()
        size = len(token.encode("utf-8"))
        if size > self._max_bytes:
            raise ValueError(f"token of {size} bytes exceeds the platform's {self._max_bytes}")
        if token in self._choices:
            raise ValueError("the token factory repeated a live token")
        self._choices[token] = choice
        self._owned.setdefault(owner, []).append(token)
        return token

    def lookup(self, token: str) -> Choice | None:
        return self._choices.get(token)

    def owned(self, owner: str) -> list[tuple[str, Choice]]:
        return [(t, self._choices[t]) for t in self._owned.get(owner, [])]

    def retire(self, owner: str) -> None:
        for token in self._owned.pop(owner, []):
            self._choices.pop(token, None)

    def owners(self) -> list[str]:
        return list(self._owned)

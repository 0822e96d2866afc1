"""Inbound message + conversation state → what to do (pure, no I/O).

`route()` decides, for one already-authorized, de-duplicated `Inbound`, which
`Intent` the conversation carries out. The rules are DESIGN.md's "Inbound"
table: idle → prompt; busy → steer, follow-up or ask, by policy; `>>` and
`/later` queue a follow-up; `/stop` aborts; control commands map to RPC
commands; unknown `/words` reach the agent as prompts (extension commands,
prompt templates, skills); while the agent compacts, steer and follow-up wait.
An input dialog is answered by a reply to its message or, after its [Answer]
button was pressed without a form, by the presser's next message that is not
a command.
Admission (who may talk, duplicates) happens before routing: admission.py.
What a `/word` is comes from the command registry (controls/table.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from bridge.controls.table import COMMANDS

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from bridge.model import Image, Inbound

FOLLOW_UP_PREFIX = ">>"


@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    images: tuple[Image, ...] = ()


@dataclass(frozen=True, slots=True)
class Steer:
    text: str
    images: tuple[Image, ...] = ()


@dataclass(frozen=True, slots=True)
class FollowUp:
    text: str
    images: tuple[Image, ...] = ()


@dataclass(frozen=True, slots=True)
class AskBusy:
    """Busy policy "ask": offer [Steer now] [After this run]."""

    text: str
    images: tuple[Image, ...] = ()


@dataclass(frozen=True, slots=True)
class Hold:
    """The agent is compacting: deliver as `then` once compaction ends."""

    then: Steer | FollowUp


@dataclass(frozen=True, slots=True)
class Stop:
    pass


@dataclass(frozen=True, slots=True)
class Press:
    token: str
    press_id: str
    text: str | None = None  # an answer typed into the button's form


@dataclass(frozen=True, slots=True)
class DialogReply:
    """A reply to an input/editor dialog's message: its answer."""

    request_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Control:
    name: str
    arg: str = ""


@dataclass(frozen=True, slots=True)
class Ignore:
    reason: str


Intent = Prompt | Steer | FollowUp | AskBusy | Hold | Stop | Press | DialogReply | Control | Ignore
BusyPolicy = Literal["steer", "follow_up", "ask"]


@dataclass(frozen=True, slots=True)
class View:
    """What routing needs to know about the conversation right now."""

    busy: bool = False
    compacting: bool = False
    policy: BusyPolicy = "steer"
    # platform message id of an open input/editor dialog's message → its request id
    input_dialogs: Mapping[str, str] | None = None
    # sender id → request id of an input dialog whose [Answer] that sender pressed:
    # their next message answers it (Slack cannot reply to one message)
    awaiting: Mapping[str, str] | None = None
    bot_name: str = ""  # Telegram's "/cmd@botname" is normalised against it
    prefixes: tuple[str, ...] = ("/",)  # Slack threads also take "!cmd"


def route(inbound: Inbound, view: View) -> Intent:
    press = inbound.press
    if press is not None:
        return Press(press.token, press.press_id, press.text)
    dialogs = view.input_dialogs or {}
    if inbound.reply_to is not None and inbound.reply_to in dialogs:
        return DialogReply(dialogs[inbound.reply_to], inbound.text)
    text = inbound.text.strip()
    if not text and not inbound.images:
        return Ignore("empty message")
    command = parse_command(text, view.prefixes, view.bot_name)
    awaited = (view.awaiting or {}).get(inbound.sender.id)
    if awaited is not None and command is None and text:
        return DialogReply(awaited, inbound.text)  # commands (/stop) stay commands
    if command is not None:
        return _command(command[0], command[1], inbound.images, view)
    if text.startswith(FOLLOW_UP_PREFIX):
        return _queued(FollowUp(text[len(FOLLOW_UP_PREFIX) :].strip(), inbound.images), view)
    return _message(text, inbound.images, view)


def _command(name: str, arg: str, images: tuple[Image, ...], view: View) -> Intent:
    command = COMMANDS.find(name)
    match command.action if command is not None else None:
        case "stop":
            return Stop()
        case "steer":
            # Idle, it is the next prompt; a bare "/steer" is nothing to send, not an empty prompt.
            return _queued(Steer(arg, images), view)
        case "later":
            return _queued(FollowUp(arg, images), view)
        case "control":
            assert command is not None
            return Control(command.name, arg)
        case _:
            # Not ours: extension commands, prompt templates and skills are the agent's.
            return _message("/" + f"{name} {arg}".strip(), images, view)


def urgent(inbound: Inbound, prefixes: Collection[str], bot_name: str = "") -> Press | Stop | None:
    """The intent of an inbound that must not wait in the inbox (a button press, a
    stop), or None: a stop must reach the run it stops, a press the question that
    is open now. The rest is routed when taken from the inbox, against the state
    of that moment."""
    press = inbound.press
    if press is not None:
        return Press(press.token, press.press_id, press.text)
    command = parse_command(inbound.text.strip(), prefixes, bot_name)
    if command is None:
        return None
    found = COMMANDS.find(command[0])
    return Stop() if found is not None and found.action == "stop" else None


def _message(text: str, images: tuple[Image, ...], view: View) -> Intent:
    if not view.busy:
        # After a run the agent may still compact: a prompt then would break that
        # (pi 0.73.1 reports "compaction failed"), so it waits as a steer would.
        return _queued(Steer(text, images), view) if view.compacting else Prompt(text, images)
    if view.policy == "ask":
        return AskBusy(text, images)
    if view.policy == "follow_up":
        return _queued(FollowUp(text, images), view)
    return _queued(Steer(text, images), view)


def _queued(intent: Steer | FollowUp, view: View) -> Intent:
    if not intent.text and not intent.images:
        return Ignore("nothing to send")
    if view.compacting:
        # Released when the compaction ends: into the run, or as the next prompt.
        return Hold(intent)
    if not view.busy:
        # A follow-up to nothing is just the next prompt.
        return Prompt(intent.text, intent.images)
    return intent


def parse_command(
    text: str, prefixes: Collection[str], bot_name: str = ""
) -> tuple[str, str] | None:
    """("name", "rest") for "/name rest", "/name@bot rest" or "!name rest"; None otherwise.

    "/name@otherbot" is not ours (Telegram groups with several bots) and "//x" or
    a lone "/" are text, not commands."""
    prefix = next((p for p in prefixes if text.startswith(p)), None)
    if prefix is None:
        return None
    head, _, rest = text[len(prefix) :].partition(" ")
    head, _, mention = head.partition("@")
    if mention and bot_name and mention.lower() != bot_name.lower():
        return None
    if not head or not (head[0].isalpha() and all(c.isalnum() or c in "_-:." for c in head)):
        return None
    return head.lower(), rest.strip()

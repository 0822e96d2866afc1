"""Inbound message + conversation state → what to do (pure, no I/O).

An inbound is read once (`read`), where the supervisor takes it: what it says
before any state is looked at. A button press and a stop need no state and must
not wait behind other messages (`Reading.urgent`); the rest waits in the
conversation's inbox and is routed when taken (`route`), against the state of that
moment, so a message queued behind a prompt sees the agent busy and steers.
The rules are docs/design.md's "Inbound" table: idle → prompt; busy → steer,
follow-up or ask, by policy; `>>` and `/later` queue a follow-up; `/stop` aborts;
control commands map to RPC commands; unknown `/words` reach the agent as prompts
(extension commands, prompt templates, skills); while the agent compacts, steer
and follow-up wait. An input dialog is answered by a reply to its message or,
after its [Answer] button was pressed without a form, by the presser's next
message that is not a command. A scheduled run's text (`Inbound.scheduled`) is a
prompt, or a follow-up while the agent works, whatever it says and whatever the policy.
Admission (who may talk, duplicates) happens before reading: admission.py.
What a `/word` is comes from the command registry (controls/table.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    # How an inbound not read yet is read (`route(inbound, view)`, the tables' way in):
    bot_name: str = ""  # Telegram's "/cmd@botname" is normalised against it
    prefixes: tuple[str, ...] = ("/",)  # Slack threads also take "!cmd"


@dataclass(frozen=True, slots=True)
class Reading:
    """An inbound as `read` once, before any conversation state is looked at; it
    travels with the inbound to its conversation."""

    inbound: Inbound
    command: tuple[str, str] | None = None  # ("name", "rest") of "/name rest"

    @property
    def press(self) -> Press | None:
        press = self.inbound.press
        return None if press is None else Press(press.token, press.press_id, press.text)

    @property
    def urgent(self) -> Press | Stop | None:
        """The intent of an inbound that must not wait in the inbox (a button press, a
        stop), or None: a stop must reach the run it stops, a press the question that
        is open now."""
        press = self.press
        if press is not None:
            return press
        if self.command is None:
            return None
        command = COMMANDS.find(self.command[0])
        return Stop() if command is not None and command.action == "stop" else None


def read(inbound: Inbound, prefixes: Collection[str], bot_name: str = "") -> Reading:
    """What `inbound` says before any state is looked at: a press, or its text's
    command if it is one (with Slack's `prefixes`, and Telegram's `bot_name`)."""
    if inbound.press is not None or inbound.scheduled:  # a scheduled text is a prompt
        return Reading(inbound)
    return Reading(inbound, parse_command(inbound.text.strip(), prefixes, bot_name))


def urgent(inbound: Inbound, prefixes: Collection[str], bot_name: str = "") -> Press | Stop | None:
    """`Reading.urgent` of `inbound` read with `prefixes` and `bot_name`."""
    return read(inbound, prefixes, bot_name).urgent


def route(message: Reading | Inbound, view: View) -> Intent:
    """What the conversation does with a message, in the state `view`. An inbound not
    read yet is read here, with the view's prefixes and bot name."""
    reading = (
        message if isinstance(message, Reading) else read(message, view.prefixes, view.bot_name)
    )
    press = reading.press
    if press is not None:
        return press
    inbound = reading.inbound
    dialogs = view.input_dialogs or {}
    if inbound.reply_to is not None and inbound.reply_to in dialogs:
        return DialogReply(dialogs[inbound.reply_to], inbound.text)
    text = inbound.text.strip()
    if not text and not inbound.images:
        return Ignore("empty message")
    if inbound.scheduled:  # never an answer to a question; queued behind a run
        return _message(text, inbound.images, replace(view, policy="follow_up"))
    command = reading.command
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

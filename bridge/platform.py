"""The platform interface: what the bridge needs from a chat platform, and what a
platform may offer besides.

`Adapter` is what every platform implements (post, edit, delete, upload, answer a
press, react; its limits and its markup). What only some platforms can do is an
optional capability, a runtime-checkable Protocol the bridge tests with `isinstance`
and never by name: `Streaming` (a growing text in one message), `Drafting` (a growing
text as a draft), `DirectMessages` (a person's direct chat), `Forms` (a button's
form opened by the platform, found across a scale-out's frontends). Platform
failures reach the bridge as the `PlatformError` tree, never as SDK types.

`MEMBERS` names every member of the interface once: the Protocol that declares it,
whether it is a call to the platform or answered by the adapter itself, whether it
counts against a chat's rate, and how a call of it, given as data (`PlatformCall`),
is made (`perform`). The outbox's ops and a worker's calls that a frontend makes
(bridge/scale/) both go through `perform`; a scale-out carries exactly the members
listed here. Pure: nothing here does I/O.
"""

# The table names Protocol classes as values (to test adapters with isinstance), which
# mypy's type-abstract check reports; nothing here instantiates them.
# mypy: disable-error-code="type-abstract"

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar, runtime_checkable

from bridge.model import ChatRef, MessageRef

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.model import (
        Form,
        Inbound,
        Keyboard,
        Markup,
        Mention,
        PlatformLimits,
        ReactionState,
        Task,
    )


# --- what the bridge needs ---------------------------------------------------------------


class InboundHandler(Protocol):
    """What a platform's runner hands each converted inbound to (the bridge)."""

    async def handle(self, inbound: Inbound) -> None: ...

    def undecodable(self) -> None:
        """An update the runner could not read (the platform's library or our converter
        failed on it) was confirmed to the platform and skipped."""


class Formatter(Protocol):
    """Markdown → the platform's markup, split into messages of at most `limit`."""

    def __call__(self, markdown: str, limit: int) -> list[str]: ...


@runtime_checkable
class Adapter(Protocol):
    """What the bridge needs from a platform. Implementations translate SDK errors
    into `PlatformError` subclasses."""

    @property
    def limits(self) -> PlatformLimits: ...

    def format(self, markdown: str, limit: int) -> list[str]: ...

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        markup: Markup = "plain",
        buttons: Keyboard = (),
        force_reply: bool = False,
        silent: bool = False,
        ping: Mention | None = None,
    ) -> MessageRef:
        """Post a message. It notifies only when it pings someone (`ping`: mentioning
        them where the chat is shared); otherwise it is posted without a notification
        where the platform allows. `silent` marks progress, not a result."""

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None: ...

    async def delete(self, ref: MessageRef) -> None: ...

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef: ...

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None: ...

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None: ...


# --- what a platform may offer besides ------------------------------------------------------


@runtime_checkable
class Streaming(Protocol):
    """An adapter that can stream a growing Markdown text into one message (Slack's
    chat.startStream / appendStream / stopStream; bridge/outbox/streams.py)."""

    def streams_in(self, chat: ChatRef) -> bool: ...

    async def start_stream(
        self, chat: ChatRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> MessageRef: ...

    async def append_stream(
        self, ref: MessageRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> None: ...

    async def stop_stream(self, ref: MessageRef, markdown: str) -> None: ...

    async def set_status(self, chat: ChatRef, text: str) -> None:
        """The line under a thread saying what the agent does ("" clears it)."""


@runtime_checkable
class Drafting(Protocol):
    """An adapter that can show a growing text as an ephemeral draft (Telegram's
    `sendMessageDraft`). The outbox uses it for ops marked `draft` in chats where
    `drafts_in` says so, and falls back to sending and editing, per chat, once a
    draft is refused (bridge/outbox/drafts.py)."""

    def drafts_in(self, chat: ChatRef) -> bool: ...

    async def draft(
        self, chat: ChatRef, draft_id: int, text: str, *, markup: Markup = "plain"
    ) -> None: ...


@runtime_checkable
class DirectMessages(Protocol):
    """An adapter that can write to a person directly (Telegram: their private chat
    with the bot; Slack: the app's direct message with them)."""

    async def direct_chat(self, user_id: str) -> ChatRef | None: ...


@runtime_checkable
class Forms(Protocol):
    """An adapter that opens a button's `Form` itself (Slack: as a modal), from the
    forms it posted; `forms_elsewhere`, when set, finds one another process posted (a
    scale-out's frontends share theirs, bridge/scale/forms.py)."""

    forms_elsewhere: Callable[[str], Awaitable[Form | None]] | None


# --- platform errors ---------------------------------------------------------------------


class PlatformError(Exception):
    """A platform call failed; `permanent` says whether retrying can help."""

    permanent = True


class RateLimited(PlatformError):
    permanent = False

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited, retry after {retry_after:g} s")
        self.retry_after = retry_after


class NotModified(PlatformError):
    """An edit to the text the message already has: counts as success."""


class BadFormatting(PlatformError):
    """The platform could not parse the markup: resend as plain text."""


class MessageGone(PlatformError):
    """The message to edit or delete no longer exists."""


class StreamEnded(MessageGone):
    """The message no longer streams (ended by the platform or its reader); it is
    still there, as an ordinary message."""


class TooLong(PlatformError):
    """The text is over the platform's limit despite the renderer's split."""


class TransientError(PlatformError):
    permanent = False


# --- the members, and a call given as data ---------------------------------------------------

Made = MessageRef | ChatRef | None  # what a call answers: the message posted, a chat, or nothing


@dataclass(frozen=True, slots=True)
class PlatformCall:
    """One call of the interface as data: the member's name and its arguments (the
    rest keep their defaults). What a worker sends a frontend (bridge/scale/wire.py)."""

    method: str
    chat: ChatRef | None = None
    ref: MessageRef | None = None
    text: str = ""  # the text, caption or Markdown
    markup: Markup = "plain"
    buttons: Keyboard = ()
    force_reply: bool = False
    silent: bool = False
    filename: str = ""
    data: bytes = b""
    press_id: str = ""
    alert: bool = False
    message_id: str = ""
    state: ReactionState = "working"
    tasks: tuple[Task, ...] = ()
    draft_id: int = 0
    user_id: str = ""
    ping: Mention | None = None

    @property
    def where(self) -> ChatRef:
        if self.chat is None:
            raise PlatformError(f"{self.method}: the call names no chat")
        return self.chat

    @property
    def message(self) -> MessageRef:
        if self.ref is None:
            raise PlatformError(f"{self.method}: the call names no message")
        return self.ref


C = TypeVar("C")

# "call": made on the platform (by a frontend, for a worker); "local": answered by the
# adapter itself, no platform involved (a worker's own copy answers it); "frontend":
# set on a frontend's adapter when it is assembled, never needed by a worker.
Place = Literal["call", "local", "frontend"]


@dataclass(frozen=True, slots=True)
class Member(Generic[C]):
    """One member of the platform interface."""

    name: str
    capability: type[C]  # the Protocol that declares it: `Adapter` or an optional one
    place: Place = "call"
    # Counted against the chat's rate too (platforms count a press's answer, a
    # reaction, a status line or a DM lookup only against the whole bot).
    in_chat: bool = True
    make: Callable[[C, PlatformCall], Awaitable[Made]] | None = None
    # A platform without the capability: its call is refused, or answers None (no
    # direct chat with anyone).
    lacking: Literal["refuse", "none"] = "refuse"

    async def made(self, adapter: Adapter, call: PlatformCall) -> Made:
        if self.make is None:
            raise PlatformError(f"{self.name} is no call of the platform")
        if not isinstance(adapter, self.capability):
            if self.lacking == "none":
                return None
            raise PlatformError(f"{self.name}: the platform has no {self.capability.__name__}")
        return await self.make(adapter, call)


AnyMember = (
    Member[Adapter] | Member[Streaming] | Member[Drafting] | Member[DirectMessages] | Member[Forms]
)

MEMBERS: tuple[AnyMember, ...] = (
    Member("limits", Adapter, "local"),
    Member("format", Adapter, "local"),
    Member(
        "send",
        Adapter,
        make=lambda a, c: a.send(
            c.where,
            c.text,
            markup=c.markup,
            buttons=c.buttons,
            force_reply=c.force_reply,
            silent=c.silent,
            ping=c.ping,
        ),
    ),
    Member(
        "edit",
        Adapter,
        make=lambda a, c: a.edit(c.message, c.text, markup=c.markup, buttons=c.buttons),
    ),
    Member("delete", Adapter, make=lambda a, c: a.delete(c.message)),
    Member(
        "upload",
        Adapter,
        make=lambda a, c: a.upload(c.where, c.filename, c.data, caption=c.text),
    ),
    Member(
        "answer_press",
        Adapter,
        in_chat=False,
        make=lambda a, c: a.answer_press(c.press_id, c.text, alert=c.alert),
    ),
    Member(
        "react",
        Adapter,
        in_chat=False,
        make=lambda a, c: a.react(c.where, c.message_id, c.state),
    ),
    Member("streams_in", Streaming, "local"),
    Member(
        "start_stream",
        Streaming,
        make=lambda a, c: a.start_stream(c.where, c.text, c.tasks),
    ),
    Member(
        "append_stream",
        Streaming,
        make=lambda a, c: a.append_stream(c.message, c.text, c.tasks),
    ),
    Member("stop_stream", Streaming, make=lambda a, c: a.stop_stream(c.message, c.text)),
    Member(
        "set_status",
        Streaming,
        in_chat=False,
        make=lambda a, c: a.set_status(c.where, c.text),
    ),
    Member("drafts_in", Drafting, "local"),
    Member(
        "draft",
        Drafting,
        make=lambda a, c: a.draft(c.where, c.draft_id, c.text, markup=c.markup),
    ),
    Member(
        "direct_chat",
        DirectMessages,
        in_chat=False,
        make=lambda a, c: a.direct_chat(c.user_id),
        lacking="none",
    ),
    Member("forms_elsewhere", Forms, "frontend"),
)

MEMBER: dict[str, AnyMember] = {m.name: m for m in MEMBERS}
CALLS = frozenset(m.name for m in MEMBERS if m.place == "call")  # what a frontend makes
CAPABILITIES = (Adapter, Streaming, Drafting, DirectMessages, Forms)


async def perform(adapter: Adapter, call: PlatformCall) -> Made:
    """Make `call` through `adapter`: the one place a call given as data becomes the
    adapter's method. A call of a capability the adapter lacks is refused with a
    `PlatformError` (or answers None, as its member says); so is a name that is no call."""
    member = MEMBER.get(call.method)
    if member is None:
        raise PlatformError(f"{call.method!r} is no member of the platform interface")
    return await member.made(adapter, call)

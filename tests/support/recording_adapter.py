"""An in-memory platform for tests, and virtual time to drive it.

`RecordingAdapter` implements `bridge.model.Adapter` the way a strict platform
does: message ids increase per chat; an edit that changes neither text nor
buttons raises `NotModified`; editing or deleting a missing or deleted message
raises `MessageGone`; text over `limits.max_text` (a caption over
`limits.max_caption`) raises `TooLong`; with `reject_formatted=True` formatted
text raises `BadFormatting`. Every call, failed or not, is appended to `calls`;
`fail_next` scripts further failures, `vanish` deletes a message behind the
bridge's back, `latency` makes every call take that long (on the injected `sleep`).

`FakeClock` is virtual time. Pass `clock` and `clock.sleep` to the code under test
(and `clock` to the adapter, for `Call.at`) and run `clock.autojump` in the test's
task group: whenever every task is blocked, time jumps to the earliest sleeper's
deadline. Tests measure seconds of pacing without waiting them.

Usage::

    clock = FakeClock()
    platform = RecordingAdapter(PlatformLimits(edit_interval=1.0), clock=clock)
    outbox = Outbox(platform, clock=clock, sleep=clock.sleep)
    async with anyio.create_task_group() as tg:
        await tg.start(clock.autojump)
        await tg.start(outbox.run)
        outbox.submit("tg:1", ChatRef("1"), [Send("s", "hi")])
        await outbox.flush()
        assert platform.texts("1") == ["hi"]
        tg.cancel_scope.cancel()
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel

from bridge.model import MessageRef, PlatformLimits
from bridge.platform import BadFormatting, MessageGone, NotModified, StreamEnded, TooLong

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from anyio.abc import TaskStatus

    from bridge.model import ChatRef, Keyboard, Markup, Mention, ReactionState, Task
    from bridge.platform import Formatter

CallKind = Literal[
    "send",
    "edit",
    "delete",
    "upload",
    "answer_press",
    "react",
    "draft",
    "stream_start",
    "stream_append",
    "stream_stop",
]
SETTLE_STEPS = 20  # cheap yields before the exact (but polling) all-blocked check


# --- virtual time -------------------------------------------------------------------------


@dataclass(eq=False)
class _Sleeper:
    deadline: float
    woken: anyio.Event
    done: bool = False  # woken, or cancelled while asleep


class FakeClock:
    """Virtual seconds: `clock()` reads them, `await clock.sleep(s)` waits for them to
    pass, `advance` and `autojump` make them pass."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, _Sleeper]] = []
        self._order = itertools.count()  # equal deadlines wake in the order they slept
        self._arrival: anyio.Event | None = None  # autojump waits here with no sleepers

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        sleeper = _Sleeper(self.now + seconds, anyio.Event())
        heapq.heappush(self._sleepers, (sleeper.deadline, next(self._order), sleeper))
        if self._arrival is not None:
            self._arrival.set()
            self._arrival = None
        try:
            await sleeper.woken.wait()
        finally:
            sleeper.done = True  # a cancelled sleeper must not pull time forward

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, waking sleepers in deadline order and letting
        every task settle after each one."""
        target = self.now + seconds
        await _settle()
        while (sleeper := self._pop_due(target)) is not None:
            self._wake(sleeper)
            await _settle()
        self.now = max(self.now, target)

    async def autojump(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run in the test's task group: whenever all tasks are blocked, jump to the next
        deadline. Runs until cancelled."""
        task_status.started()
        while True:
            await _settle()
            sleeper = self._pop_due(math.inf)
            if sleeper is not None:
                self._wake(sleeper)
                continue
            if self._arrival is None:
                self._arrival = anyio.Event()
            await self._arrival.wait()

    def _pop_due(self, until: float) -> _Sleeper | None:
        while self._sleepers and self._sleepers[0][0] <= until:
            _, _, sleeper = heapq.heappop(self._sleepers)
            if not sleeper.done:
                return sleeper
        return None

    def _wake(self, sleeper: _Sleeper) -> None:
        self.now = max(self.now, sleeper.deadline)
        sleeper.done = True
        sleeper.woken.set()


async def _settle() -> None:
    """Return once every other task is blocked, i.e. virtual time may move on."""
    for _ in range(SETTLE_STEPS):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


# --- the recording platform -----------------------------------------------------------------


@dataclass
class FakeMessage:
    ref: MessageRef
    text: str  # for uploads, the caption
    markup: Markup = "plain"
    buttons: Keyboard = ()
    force_reply: bool = False
    silent: bool = False
    deleted: bool = False
    ping: Mention | None = None  # whom the message notifies (None: nobody)
    edits: list[str] = field(default_factory=list)  # the text after each edit, in order
    filename: str | None = None  # set for uploads


@dataclass(frozen=True)
class Call:
    """One adapter call as the platform saw it; `error` is what it raised, if anything."""

    kind: CallKind
    chat: ChatRef | None
    ref: MessageRef | None  # the message touched, or created by a send/upload
    text: str = ""
    markup: Markup = "plain"
    buttons: Keyboard = ()
    at: float = 0.0
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class FakeUpload:
    ref: MessageRef
    filename: str
    data: bytes
    caption: str


@dataclass
class _Script:
    kind: CallKind
    error: Exception
    times: int
    chat_id: str | None


class RecordingAdapter:
    """The `Adapter` protocol in memory; see the module docstring."""

    def __init__(
        self,
        limits: PlatformLimits | None = None,
        formatter: Formatter | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        latency: float = 0.0,
        reject_formatted: bool = False,
    ) -> None:
        self.limits = limits or PlatformLimits()
        self.reject_formatted = reject_formatted
        self.messages: dict[MessageRef, FakeMessage] = {}
        self.calls: list[Call] = []
        self.answers: list[tuple[str, str, bool]] = []  # (press_id, text, alert)
        self.uploads: list[FakeUpload] = []
        self.reactions: list[tuple[str, ReactionState]] = []  # (user's message id, state)
        self._formatter = formatter
        self._clock = clock
        self._sleep = sleep
        self.latency = latency  # seconds each call takes, before the platform decides
        self._ids: Counter[str] = Counter()  # last message id per chat
        self._scripts: list[_Script] = []
        self._changed: anyio.Event | None = None

    # --- Adapter ---------------------------------------------------------------------------

    def format(self, markdown: str, limit: int) -> list[str]:
        if self._formatter is not None:
            return self._formatter(markdown, limit)
        return [markdown[i : i + limit] for i in range(0, len(markdown), limit)] or [""]

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
        await self._travel()
        call = Call("send", chat, None, text, markup, buttons, self._clock())
        self._fail_if(call, self._text_error(text, markup))
        ref = self._new_ref(chat)
        self.messages[ref] = FakeMessage(ref, text, markup, buttons, force_reply, silent, ping=ping)
        self._record(replace(call, ref=ref))
        return ref

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        await self._travel()
        call = Call("edit", ref.chat, ref, text, markup, buttons, self._clock())
        message = self._live(ref)
        self._fail_if(call, self._edit_error(message, text, markup, buttons))
        assert message is not None  # _edit_error raised MessageGone otherwise
        message.text, message.markup, message.buttons = text, markup, buttons
        message.edits.append(text)
        self._record(call)

    async def delete(self, ref: MessageRef) -> None:
        await self._travel()
        call = Call("delete", ref.chat, ref, at=self._clock())
        message = self._live(ref)
        self._fail_if(call, None if message else MessageGone(f"message {ref.message_id} gone"))
        assert message is not None
        message.deleted = True
        self._record(call)

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        await self._travel()
        call = Call("upload", chat, None, caption, at=self._clock())
        too_long = len(caption) > self.limits.max_caption
        self._fail_if(call, TooLong("caption too long") if too_long else None)
        ref = self._new_ref(chat)
        self.messages[ref] = FakeMessage(ref, caption, filename=filename)
        self.uploads.append(FakeUpload(ref, filename, data, caption))
        self._record(replace(call, ref=ref))
        return ref

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        await self._travel()
        call = Call("answer_press", None, None, text, at=self._clock())
        self._fail_if(call, None)
        self.answers.append((press_id, text, alert))
        self._record(call)

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        await self._travel()
        call = Call("react", chat, MessageRef(chat, message_id), state, at=self._clock())
        self._fail_if(call, None)
        self.reactions.append((message_id, state))
        self._record(call)

    # --- scripting -------------------------------------------------------------------------

    def fail_next(
        self,
        kind: CallKind,
        error: Exception,
        *,
        times: int = 1,
        chat: ChatRef | str | None = None,
    ) -> None:
        """Make the next `times` calls of `kind` (in `chat`, if given) raise `error`.
        Scripts are used in the order they were added."""
        chat_id = chat.chat_id if chat is not None and not isinstance(chat, str) else chat
        self._scripts.append(_Script(kind, error, times, chat_id))

    def vanish(self, ref: MessageRef) -> None:
        """Delete a message on the platform side (a user or admin removed it)."""
        self.messages[ref].deleted = True

    # --- inspection ------------------------------------------------------------------------

    def live(self, chat: ChatRef | str) -> list[FakeMessage]:
        """The chat's messages that were not deleted, oldest first. A `str` chat is a
        chat id and covers all its threads; a `ChatRef` matches exactly."""
        return [m for m in self.messages.values() if not m.deleted and _in(m.ref.chat, chat)]

    def texts(self, chat: ChatRef | str) -> list[str]:
        return [m.text for m in self.live(chat)]

    def last(self, chat: ChatRef | str) -> FakeMessage:
        messages = self.live(chat)
        if not messages:
            raise LookupError(f"no live message in chat {chat}")
        return messages[-1]

    def find(self, substring: str) -> FakeMessage:
        """The newest live message (any chat) whose text contains `substring`."""
        for message in reversed(self.messages.values()):
            if not message.deleted and substring in message.text:
                return message
        raise LookupError(f"no live message contains {substring!r}; texts: {self._all_texts()}")

    def buttons_of(self, ref: MessageRef) -> Keyboard:
        return self.messages[ref].buttons

    def calls_of(self, kind: CallKind, *, ok: bool | None = None) -> list[Call]:
        """Calls of `kind`; with `ok`, only the succeeded (True) or failed (False) ones."""
        return [c for c in self.calls if c.kind == kind and (ok is None or c.ok == ok)]

    async def wait_for(
        self,
        predicate: Callable[[], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 - the helper's documented signature
    ) -> None:
        """Wait (real seconds) until `predicate()` holds; it is checked after every call."""
        try:
            with anyio.fail_after(timeout):
                while not predicate():
                    if self._changed is None:
                        self._changed = anyio.Event()
                    await self._changed.wait()
        except TimeoutError:
            recent = "\n  ".join(map(repr, self.calls[-5:]))
            raise AssertionError(
                f"not reached within {timeout} s; last calls:\n  {recent}"
            ) from None

    # --- internals -------------------------------------------------------------------------

    async def _travel(self) -> None:
        """A real call yields to the event loop, and takes `latency` seconds."""
        if self.latency > 0:
            await self._sleep(self.latency)
        else:
            await anyio.lowlevel.checkpoint()

    def _new_ref(self, chat: ChatRef) -> MessageRef:
        self._ids[chat.chat_id] += 1
        return MessageRef(chat, str(self._ids[chat.chat_id]))

    def _live(self, ref: MessageRef) -> FakeMessage | None:
        message = self.messages.get(ref)
        return None if message is None or message.deleted else message

    def _text_error(self, text: str, markup: Markup) -> Exception | None:
        if self.reject_formatted and markup == "formatted":
            return BadFormatting("can't parse entities")
        if len(text) > self.limits.max_text:
            return TooLong("message is too long")
        return None

    def _edit_error(
        self, message: FakeMessage | None, text: str, markup: Markup, buttons: Keyboard
    ) -> Exception | None:
        if message is None:
            return MessageGone("message to edit not found")
        if (error := self._text_error(text, markup)) is not None:
            return error
        if (text, buttons) == (message.text, message.buttons):
            return NotModified("message is not modified")
        return None

    def _fail_if(self, call: Call, error: Exception | None) -> None:
        """Raise a scripted failure, else the platform's own refusal `error`, recording
        the failed call first."""
        error = self._scripted(call) or error
        if error is not None:
            self._record(replace(call, error=error))
            raise error

    def _scripted(self, call: Call) -> Exception | None:
        chat_id = call.chat.chat_id if call.chat is not None else None
        for script in self._scripts:
            if script.kind == call.kind and script.chat_id in (None, chat_id):
                script.times -= 1
                if script.times <= 0:
                    self._scripts.remove(script)
                return script.error
        return None

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _all_texts(self) -> list[str]:
        return [m.text for m in self.messages.values() if not m.deleted]


def _in(chat: ChatRef, wanted: ChatRef | str) -> bool:
    return chat.chat_id == wanted if isinstance(wanted, str) else chat == wanted


class DraftingAdapter(RecordingAdapter):
    """A `RecordingAdapter` that also shows drafts (`bridge.outbox.drafts.Drafting`), in the
    chats of `draft_chats` (all when None); `refuse` makes every draft raise it.
    `drafts[chat_id]` is each draft shown there, as (draft id, text)."""

    def __init__(
        self, *args: Any, draft_chats: frozenset[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.draft_chats = draft_chats
        self.refuse: Exception | None = None
        self.drafts: dict[str, list[tuple[int, str]]] = {}

    def drafts_in(self, chat: ChatRef) -> bool:
        return self.draft_chats is None or chat.chat_id in self.draft_chats

    async def draft(
        self, chat: ChatRef, draft_id: int, text: str, *, markup: Markup = "plain"
    ) -> None:
        await self._travel()
        call = Call("draft", chat, None, text, markup, at=self._clock())
        self._fail_if(call, self.refuse or self._text_error(text, markup))
        self.drafts.setdefault(chat.chat_id, []).append((draft_id, text))
        self._record(call)


class StreamingAdapter(RecordingAdapter):
    """A `RecordingAdapter` that also streams (`bridge.outbox.streams.Streaming`), like
    Slack's chat.startStream / appendStream / stopStream, in the chats of
    `stream_chats` (all when None); `refuse` makes every start raise it. A streamed
    message is a message whose text grows with each append; `streaming` holds the
    messages that still take appends (`expire` ends one as Slack does after ~5 min):
    appending to or stopping any other raises `StreamEnded`."""

    def __init__(
        self, *args: Any, stream_chats: frozenset[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.stream_chats = stream_chats
        self.refuse: Exception | None = None
        self.streaming: set[MessageRef] = set()
        # Task cards per streamed message: each card's states in order, by task id.
        self.cards: dict[MessageRef, dict[str, list[Task]]] = {}
        self.statuses: list[tuple[ChatRef, str]] = []  # every status line set

    def streams_in(self, chat: ChatRef) -> bool:
        return self.stream_chats is None or chat.chat_id in self.stream_chats

    async def start_stream(
        self, chat: ChatRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> MessageRef:
        await self._travel()
        call = Call("stream_start", chat, None, markdown, "formatted", at=self._clock())
        self._fail_if(call, self.refuse or self._text_error(markdown, "plain"))
        ref = self._new_ref(chat)
        self.messages[ref] = FakeMessage(ref, markdown, "formatted")
        self.streaming.add(ref)
        self._card(ref, tasks)
        self._record(replace(call, ref=ref))
        return ref

    async def append_stream(
        self, ref: MessageRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> None:
        await self._grow("stream_append", ref, markdown)
        self._card(ref, tasks)

    async def set_status(self, chat: ChatRef, text: str) -> None:
        await self._travel()
        self.statuses.append((chat, text))

    def _card(self, ref: MessageRef, tasks: Sequence[Task]) -> None:
        for task in tasks:
            self.cards.setdefault(ref, {}).setdefault(task.id, []).append(task)

    async def stop_stream(self, ref: MessageRef, markdown: str) -> None:
        await self._grow("stream_stop", ref, markdown)
        self.streaming.discard(ref)

    def expire(self, ref: MessageRef) -> None:
        """The platform ends the stream of `ref`: it stays, as an ordinary message."""
        self.streaming.discard(ref)

    async def _grow(self, kind: CallKind, ref: MessageRef, markdown: str) -> None:
        await self._travel()
        call = Call(kind, ref.chat, ref, markdown, "formatted", at=self._clock())
        message = self._live(ref)
        error: Exception | None = None
        if message is None:
            error = MessageGone("message_not_found")
        elif ref not in self.streaming:
            error = StreamEnded("message_not_in_streaming_state")
        else:
            error = self._text_error(markdown, "plain")
        self._fail_if(call, error)
        assert message is not None
        message.text += markdown
        message.edits.append(message.text)
        self._record(call)

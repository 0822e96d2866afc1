"""Native streams of a growing text (Slack's chat.startStream / appendStream /
stopStream), and the outbox's record of them.

A platform that streams (`Streaming`) gets the ops marked `draft` as one stream per
slot: the Send starts it, each draft Edit appends what its Markdown adds, the first
Edit without the mark stops it. A stream only ever grows, so the record keeps the
Markdown streamed so far per (conversation key, slot); a text that does not extend
it ends the stream and is edited in as an ordinary message. A chat that refused
a stream posts and edits from then on, as for drafts (`refusals.py`). A stream the
platform ended (`StreamEnded`: Slack ends one after about five minutes, or its reader
stopped it) is an ordinary message from then on. The ops of a run (`Send.run`) stream
together instead (`runs.py`, its record `RunStream` here).

What a stream takes is the text a posted message shows, not the agent's Markdown
source (`markdown_of`): the agent's text is shown, never obeyed, and the platform reads
a stream as one text, each append added to what it holds (chat.appendStream: "appended
to the message received so far"). So at every moment the stream must hold `disarmed`
Markdown, and what it holds must stay the beginning of what follows: while a text grows
(`draft`) only its `settled` part goes out (no link, code span or tag still open), and
pieces are cut where the text before the cut is settled too, so a stream that goes on
in a new message never starts inside a link or code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bridge.outbox.refusals import Refusals
from bridge.platform import Streaming
from bridge.render.growing_markdown import sealed, settled
from bridge.render.safe_markdown import disarmed

if TYPE_CHECKING:
    from bridge.model import ChatRef, Edit, MessageRef, PlatformLimits, Send, Task
    from bridge.outbox.pacer import Pacer
    from bridge.platform import Adapter


@dataclass
class RunStream:
    """The stream a run's text and task cards go to (`runs.py`)."""

    run: str
    chat: ChatRef
    ref: MessageRef
    parts: dict[str, str] = field(default_factory=dict)  # text slot → Markdown streamed
    tasks: dict[str, Task] = field(default_factory=dict)  # tool slot → its card as shown
    status: str = ""  # the thread's status line, as last set

    @property
    def empty(self) -> bool:
        return not any(self.parts.values())


class Streams(Refusals):
    """The chats that refused a stream, and the Markdown streamed so far per slot."""

    def __init__(self, adapter: Adapter, pacer: Pacer) -> None:
        super().__init__("a stream")
        self._adapter = adapter if isinstance(adapter, Streaming) else None
        self._sent: dict[tuple[str, str], str] = {}
        # The platform's budgets of starts, stops, appends and status lines, each its
        # own (`bridge.rates`): a start is only made with one to spare, a stop waits.
        self.pacer = pacer
        self._runs: dict[str, RunStream] = {}  # conversation key → its run's stream

    async def start_spare(self, limits: PlatformLimits, chat: ChatRef | None = None) -> bool:
        """Whether a stream may start now without going over the platform's budget;
        when not, the answer is posted and edited (it still arrives, without a 429)."""
        return await self.pacer.spare(limits, "start_stream", chat)

    async def stop_turn(self, limits: PlatformLimits, chat: ChatRef | None = None) -> None:
        """Wait for the stop budget: every started stream must be stopped."""
        await self.pacer.take(limits, "stop_stream", chat)

    async def start_turn(self, limits: PlatformLimits, chat: ChatRef | None = None) -> None:
        """Wait for a start (a run's stream rolling over to a new one must go on)."""
        await self.pacer.take(limits, "start_stream", chat)

    async def append_turn(self, limits: PlatformLimits, chat: ChatRef | None = None) -> None:
        """Wait for the append budget; meanwhile newer text merges into the queued op,
        so a tight budget makes fewer, larger appends."""
        await self.pacer.take(limits, "append_stream", chat)

    async def status_spare(self, limits: PlatformLimits, chat: ChatRef | None = None) -> bool:
        """A status line is a nicety: it is set only with a call to spare."""
        return await self.pacer.spare(limits, "set_status", chat)

    @property
    def adapter(self) -> Streaming | None:
        return self._adapter

    def usable(self, chat: ChatRef) -> Streaming | None:
        """The adapter to stream with in `chat`, or None: post and edit instead."""
        adapter = self._adapter
        if adapter is None or not self.allows(chat) or not adapter.streams_in(chat):
            return None
        return adapter

    def streamed(self, key: str, slot: str) -> str | None:
        """The Markdown the slot's live stream shows; None when it has none."""
        run = self._runs.get(key)
        if run is not None and slot in run.parts:
            return run.parts[slot]
        return self._sent.get((key, slot))

    def run_of(self, key: str) -> RunStream | None:
        """The live stream of conversation `key`'s run, if it has one."""
        return self._runs.get(key)

    def open_run(self, key: str, run: RunStream) -> None:
        self._runs[key] = run

    def close_run(self, key: str) -> None:
        self._runs.pop(key, None)

    def note(self, key: str, slot: str, markdown: str) -> None:
        self._sent[(key, slot)] = markdown

    def forget(self, key: str, slot: str) -> None:
        self._sent.pop((key, slot), None)

    def drop(self, key: str) -> None:
        """Forget the streams of conversation `key` (it is gone)."""
        for gone in [k for k in self._sent if k[0] == key]:
            del self._sent[gone]
        self._runs.pop(key, None)


def extension(streamed: str, markdown: str) -> str | None:
    """What `markdown` adds to `streamed`; None when it does not extend it."""
    return markdown[len(streamed) :] if markdown.startswith(streamed) else None


def markdown_of(op: Send | Edit) -> str:
    """The Markdown a stream shows for `op`: its source (`plain` of a formatted view)
    disarmed, as a posted message shows it; while it grows (`draft`), only as far as it
    is settled; whole, with a code block left open closed (a run's next text follows)."""
    source = op.plain or op.text
    if op.draft:
        return disarmed(settled(source), streamed=True)
    return sealed(disarmed(source, streamed=True))


def pieces(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters (none for an empty text), each
    cut where the text before it is settled, when there is such a place."""
    limit, out = max(1, limit), []
    while len(text) > limit:
        cut = len(settled(text[:limit])) or limit
        out.append(text[:cut])
        text = text[cut:]
    return [*out, text] if text else out

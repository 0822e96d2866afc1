"""Slack's native AI streaming in the fake Slack: chat.startStream, chat.appendStream,
chat.stopStream and assistant.threads.setStatus, mixed into `FakeSlack`.

A stream is a message in the fake's store (a `Posted` with its `Stream`), so what reads
the messages a user sees keeps working; `Posted.streaming` says whether it still takes
appends. A stream keeps its text (every markdown_text appended), its task cards by id
(latest state and every state), and how it ended. Thread statuses are in `statuses`;
`status_of()` is what the thread shows now.

Rules from the method pages (docs.slack.dev/reference/methods/<method>) unless marked:
- chat.startStream outside a DM (ids starting "D" are DMs here) needs recipient_team_id
  and recipient_user_id (missing_recipient_team_id / missing_recipient_user_id);
  task_display_mode is timeline, plan or dense.
- markdown_text, and each markdown_text chunk, at most 12,000 characters. Over it the
  fake answers msg_too_long: the pages list no error for it; streaming bots report that
  one, per request.
- A request has markdown_text or chunks, not both
  (cannot_provide_both_markdown_text_and_chunks; documented for append and stop, refused
  at the start too); an append needs one (markdown_text_or_chunks_required). A stream
  keeps the way its content came first (streaming_mode_mismatch;
  docs/design.md, "Platform libraries").
- Chunks: markdown_text, task_update, plan_update, blocks; anything else, or a malformed
  one, is invalid_chunks. task_update (the chunk object, docs.slack.dev/messaging/
  sending-and-scheduling-messages#text-streaming): id always, title and status when the
  id is new, status one of pending, in_progress, complete, error; details and output at
  most 256 characters (the limit Microsoft's Slack SDK documents; the fake applies it to
  the title too). A later update replaces title, status and output and appends details
  (as streaming bots report Slack renders it).
- Appending to or stopping an unknown ts: message_not_found; a stopped or expired stream
  (or an ordinary message): message_not_in_streaming_state; after `stop_by_user()`, an
  append: stopped_by_user. Slack ends a stream about 5 minutes after its start, appends
  or not (reported, not documented): `stream_life`, counted from chat.startStream.
- chat.stopStream takes a last append and `blocks` (at most 50, Block Kit checked).
- assistant.threads.setStatus: an empty status clears it, a reply of the bot in the
  thread (a posted or streamed message) clears it, and it goes after two minutes;
  loading_messages at most 10 (over it: invalid_arguments, the fake's choice).
- `without_streaming`: "missing_scope" answers as a token without chat:write (the scope
  the four methods list) would, "unknown_method" as a Slack without these methods.
- Rate limits (with `enforce_limits`): each method's own budget, as for every method
  (fake_slack_limits.py).
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from aiohttp import web

from tests.support.fake_slack_limits import BUDGETS
from tests.support.fake_slack_messages import MAX_BLOCKS, Posted, blocks_of, blocks_ok

if TYPE_CHECKING:
    from collections.abc import Callable

Json = dict[str, Any]
Self_ = TypeVar("Self_", bound="StreamingMethods")

STREAM_METHODS = frozenset(
    {"chat.startStream", "chat.appendStream", "chat.stopStream", "assistant.threads.setStatus"}
)
STREAM_SCOPE = "chat:write"
MAX_STREAM_TEXT = 12_000  # markdown_text per request, and per markdown_text chunk
MAX_TASK_TEXT = 256  # a task's details / output (and, by the fake's choice, title)
MAX_LOADING_MESSAGES = 10
STREAM_LIFE = 300.0  # s from chat.startStream until Slack ends the stream
STATUS_LIFE = 120.0  # s a thread status lasts without a reply ("a two minute timeout")
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
DISPLAY_MODES = frozenset({"timeline", "plan", "dense"})
# method → (bucket size, refill per second) of the streaming methods' budgets.
STREAM_TIERS: dict[str, tuple[float, float]] = {
    method: (BUDGETS[method].burst, BUDGETS[method].rate) for method in STREAM_METHODS
}


class _Refused(Exception):
    """Slack's `{"ok": false, "error": …}` answer to a stream call."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass
class Task:
    """A task card of a stream, as its task_update chunks left it."""

    id: str
    title: str
    status: str
    details: str = ""
    output: str = ""
    history: list[Json] = field(default_factory=list)  # its state after each update

    def update(self, chunk: Json) -> None:
        self.title = chunk.get("title") or self.title
        self.status = chunk.get("status") or self.status
        self.details += chunk.get("details") or ""
        self.output = chunk.get("output") or self.output
        state = {"title": self.title, "status": self.status, "details": self.details}
        self.history.append({**state, "output": self.output})


@dataclass
class Stream:
    """What a streamed message holds, and whether it still streams."""

    deadline: float  # the clock's time at which Slack ends it
    clock: Callable[[], float] = field(repr=False, compare=False)
    mode: str | None = None  # "markdown_text" or "chunks": how its content comes
    display: str = "timeline"
    recipient: tuple[str, str] | None = None  # (team, user) when outside a DM
    text: str = ""
    tasks: dict[str, Task] = field(default_factory=dict)
    plan_title: str = ""
    blocks: list[Json] = field(default_factory=list)  # from blocks chunks
    ended: str | None = None  # "stopped" or "stopped_by_user"

    @property
    def streaming(self) -> bool:
        return self.ended is None and self.clock() < self.deadline

    @property
    def state(self) -> str:
        """streaming, stopped, stopped_by_user or expired."""
        return self.ended or ("streaming" if self.streaming else "expired")

    def shown(self) -> list[str]:
        """The lines a reader sees: the text, the plan's title, a line per task card."""
        plan = [self.plan_title] if self.plan_title else []
        cards = [f"[{t.status}] {t.title}" for t in self.tasks.values()]
        return [self.text, *plan, *cards]

    def apply(self, chunks: list[Json]) -> None:
        """Add checked chunks (`check_chunks`) to what the message shows."""
        for chunk in chunks:
            kind = chunk["type"]
            if kind == "markdown_text":
                self.text += chunk["text"]
            elif kind == "task_update":
                if chunk["id"] not in self.tasks:
                    self.tasks[chunk["id"]] = Task(chunk["id"], chunk["title"], chunk["status"])
                self.tasks[chunk["id"]].update(chunk)
            elif kind == "plan_update":
                self.plan_title = chunk["title"]
            else:
                self.blocks.extend(chunk["blocks"])


@dataclass
class ThreadStatus:
    text: str
    loading_messages: list[str]
    at: float  # the clock's time it was set


def _refusals(method: Callable[[Self_, Json], Json]) -> Callable[[Self_, Json], Json]:
    """A handler whose `_Refused` becomes Slack's error answer."""

    @functools.wraps(method)
    def answer(self: Self_, args: Json) -> Json:
        try:
            return method(self, args)
        except _Refused as refused:
            return {"error": refused.error}

    return answer


@dataclass(kw_only=True)
class StreamingMethods:
    """The streaming methods and their state; `FakeSlack` provides the message store."""

    stream_life: float = STREAM_LIFE
    status_life: float = STATUS_LIFE
    without_streaming: Literal["missing_scope", "unknown_method"] | None = None
    statuses: dict[tuple[str, str], ThreadStatus] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic  # of stream lives, statuses, their limits

    if TYPE_CHECKING:  # provided by FakeSlack

        @property
        def messages(self) -> dict[str, Posted]: ...

        @property
        def scopes(self) -> list[str]: ...

        def new_ts(self) -> str: ...

    # --- test controls and observing -----------------------------------------------

    def stream(self, ts: str) -> Stream:
        """The stream of message `ts` (KeyError when it is not a streamed message)."""
        found = self.messages[ts].stream
        if found is None:
            raise KeyError(ts)
        return found

    def stop_by_user(self, ts: str) -> None:
        """The reader presses the stream's Stop: further appends are refused."""
        self.stream(ts).ended = "stopped_by_user"

    def status_of(self, channel: str, thread_ts: str) -> str:
        """The status the thread shows now ("" when none)."""
        status = self.statuses.get((channel, thread_ts))
        if status is None or self.clock() - status.at >= self.status_life:
            return ""
        return status.text

    # --- hooks of FakeSlack's request handling ----------------------------------------

    def _streaming_refusal(self, method: str) -> web.Response | None:
        """The answer of a workspace without the streaming methods (None: it has them)."""
        if self.without_streaming is None or method not in STREAM_METHODS:
            return None
        if self.without_streaming == "unknown_method":
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        provided = ",".join(s for s in self.scopes if s != STREAM_SCOPE)
        body = {"ok": False, "error": "missing_scope", "needed": STREAM_SCOPE}
        return web.json_response({**body, "provided": provided})

    def _clear_status(self, channel: str, thread_ts: str | None) -> None:
        """The bot replied in the thread: Slack clears its status."""
        if thread_ts:
            self.statuses.pop((channel, thread_ts), None)

    # --- Web API methods -----------------------------------------------------------------

    @_refusals
    def _m_chat_startStream(self, args: Json) -> Json:
        channel = str(args.get("channel") or "")
        if not channel:
            raise _Refused("channel_not_found")
        team, user = args.get("recipient_team_id"), args.get("recipient_user_id")
        if not channel.startswith("D") and not team:
            raise _Refused("missing_recipient_team_id")
        if not channel.startswith("D") and not user:
            raise _Refused("missing_recipient_user_id")
        display = str(args.get("task_display_mode") or "timeline")
        if display not in DISPLAY_MODES:
            raise _Refused("invalid_arguments")
        mode, chunks = _content(args, required=False)
        recipient = (str(team), str(user)) if team and user else None
        stream = Stream(self.clock() + self.stream_life, self.clock, mode, display, recipient)
        check_chunks(stream, chunks)
        stream.apply(chunks)
        ts, thread = self.new_ts(), args.get("thread_ts") or None
        self.messages[ts] = Posted(channel, ts, stream.text, [], thread, stream=stream)
        self._clear_status(channel, thread)
        return {"channel": channel, "ts": ts}

    @_refusals
    def _m_chat_appendStream(self, args: Json) -> Json:
        posted, stream = self._live(args, appending=True)
        mode, chunks = _content(args, required=True)
        _add(stream, mode, chunks)
        posted.text = stream.text
        return {"channel": posted.channel, "ts": posted.ts}

    @_refusals
    def _m_chat_stopStream(self, args: Json) -> Json:
        posted, stream = self._live(args, appending=False)
        mode, chunks = _content(args, required=False)
        blocks = _blocks(args)
        _add(stream, mode, chunks)
        stream.ended = "stopped"
        posted.text, posted.blocks = stream.text, blocks
        message = {"ts": posted.ts, "text": stream.text, "blocks": blocks}
        return {"channel": posted.channel, "ts": posted.ts, "message": message}

    @_refusals
    def _m_assistant_threads_setStatus(self, args: Json) -> Json:
        channel, thread = str(args.get("channel_id") or ""), str(args.get("thread_ts") or "")
        if not channel:
            raise _Refused("channel_not_found")
        if not thread:
            raise _Refused("invalid_thread_ts")
        loading = _json_arg(args.get("loading_messages"), "invalid_arguments") or []
        if "status" not in args or not isinstance(loading, list):
            raise _Refused("invalid_arguments")
        if len(loading) > MAX_LOADING_MESSAGES:
            raise _Refused("invalid_arguments")
        if status := str(args["status"]):
            self.statuses[(channel, thread)] = ThreadStatus(status, loading, self.clock())
        else:
            self._clear_status(channel, thread)
        return {}

    def _live(self, args: Json, *, appending: bool) -> tuple[Posted, Stream]:
        """The message `ts` names, when it is a stream that still takes content."""
        posted = self.messages.get(str(args.get("ts") or ""))
        if posted is None or posted.deleted:
            raise _Refused("message_not_found")
        if posted.channel != str(args.get("channel") or ""):
            raise _Refused("channel_not_found")
        stream = posted.stream
        if stream is not None and appending and stream.ended == "stopped_by_user":
            raise _Refused("stopped_by_user")
        if stream is None or not stream.streaming:
            raise _Refused("message_not_in_streaming_state")
        return posted, stream


def _add(stream: Stream, mode: str | None, chunks: list[Json]) -> None:
    """Append a request's content, all of it or (refused) none."""
    if mode is not None and stream.mode not in (None, mode):
        raise _Refused("streaming_mode_mismatch")
    check_chunks(stream, chunks)
    stream.apply(chunks)
    stream.mode = stream.mode or mode


def _content(args: Json, *, required: bool) -> tuple[str | None, list[Json]]:
    """A request's content as chunks, and how it came (markdown_text or chunks)."""
    text, chunks = args.get("markdown_text"), _json_arg(args.get("chunks"), "invalid_chunks")
    if chunks is not None and not (
        isinstance(chunks, list) and all(isinstance(c, dict) for c in chunks)
    ):
        raise _Refused("invalid_chunks")
    if text and chunks:
        raise _Refused("cannot_provide_both_markdown_text_and_chunks")
    if text:
        return "markdown_text", [{"type": "markdown_text", "text": _checked_text(text)}]
    if chunks:
        return "chunks", chunks
    if required:
        raise _Refused("markdown_text_or_chunks_required")
    return None, []


def check_chunks(stream: Stream, chunks: list[Json]) -> None:
    """Refuse the whole request if one of its chunks is malformed (invalid_chunks)."""
    known = set(stream.tasks)
    for chunk in chunks:
        kind = chunk.get("type")
        if kind == "markdown_text":
            _checked_text(chunk.get("text"))
        elif kind == "task_update":
            _check_task(chunk, known)
        elif kind == "plan_update":
            _check_strings(chunk, "title", limit=MAX_STREAM_TEXT, required=True)
        elif kind != "blocks" or not _blocks_fine(chunk.get("blocks")):
            raise _Refused("invalid_chunks")


def _check_task(chunk: Json, known: set[str]) -> None:
    task_id = chunk.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise _Refused("invalid_chunks")
    first = task_id not in known
    _check_strings(chunk, "title", "status", limit=MAX_TASK_TEXT, required=first)
    _check_strings(chunk, "details", "output", limit=MAX_TASK_TEXT, required=False)
    if chunk.get("status", "pending") not in TASK_STATUSES:
        raise _Refused("invalid_chunks")
    known.add(task_id)


def _check_strings(chunk: Json, *names: str, limit: int, required: bool) -> None:
    for name in names:
        value = chunk.get(name)
        if value is None and not required:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > limit:
            raise _Refused("invalid_chunks")


def _checked_text(text: object) -> str:
    if not isinstance(text, str) or not text:
        raise _Refused("invalid_chunks")
    if len(text) > MAX_STREAM_TEXT:
        raise _Refused("msg_too_long")
    return text


def _blocks(args: Json) -> list[Json]:
    """chat.stopStream's `blocks`, checked like a posted message's."""
    try:
        blocks = blocks_of(args)
    except ValueError:
        raise _Refused("invalid_blocks") from None
    if len(blocks) > MAX_BLOCKS:
        raise _Refused("msg_blocks_too_many")
    if not _blocks_fine(blocks):
        raise _Refused("invalid_blocks")
    return blocks


def _blocks_fine(blocks: object) -> bool:
    return (
        isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks) and blocks_ok(blocks)
    )


def _json_arg(value: object, error: str) -> object:
    """An array argument: JSON in a form field, or already decoded from a JSON body."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise _Refused(error) from None

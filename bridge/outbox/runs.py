"""A run's answer and tool calls as one native stream, with a task card per tool call.

Where the chat streams (`Streaming`), the ops stamped with a run (`Send.run`) go to
one stream per run instead of one message per slot: the run's text slots are
appended to it one after the other (a blank line between messages), and each tool
call's op carries a `Task` that is sent as a task card, updated in place by its id
(the toolCallId) as the call runs and ends. The op with `run_over` (the run's final
status) stops the stream; an op of another run stops it as well.

- The first op of a run starts the stream only with a start to spare in the
  platform's budget. A run's first text waits for one while it grows (`held`), up to
  `HOLD_LIMIT`; otherwise, and in chats that do not stream, each op is carried out as
  the message it also is (`False`: the ordinary call follows).
- A stream the platform ended (`StreamEnded`: Slack ends one after about five
  minutes) rolls over: a new stream, below it, takes the rest of the text and the
  cards still running. Appends wait for their budget (Tier 4 on Slack); meanwhile
  newer text merges into the queued op, so appends grow instead of multiplying.
- A text that no longer extends what its slot streamed (rare: the final text differs
  from the deltas) ends the stream, and the slot is posted whole below it. Nothing
  is lost; the reader may see a part twice.
- While a tool runs, a thread's status line names it ("is running `npm test`…"),
  set only with a call to spare and cleared when the run's stream ends.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bridge.model import Delete, Edit, Send
from bridge.outbox.recovery import as_send
from bridge.outbox.refusals import is_refusal
from bridge.outbox.streams import RunStream, extension, markdown_of, pieces
from bridge.platform import MessageGone, PlatformError, StreamEnded

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from bridge.model import PlatformLimits, Task
    from bridge.outbox.lanes import Entry
    from bridge.outbox.slots import SlotMap
    from bridge.outbox.streams import Streams
    from bridge.platform import Streaming

log = logging.getLogger(__name__)

SEPARATOR = "\n\n"  # between the texts of a run's messages in its stream
# Seconds a run's first text may wait for a stream start, gathering its text; past
# that it is posted and edited.
HOLD_LIMIT = 30.0


async def held(
    entry: Entry, slots: SlotMap, streams: Streams, limits: PlatformLimits, now: float
) -> bool:
    """Whether `entry` waits for a stream start: the first text of a run in a chat that
    streams, still growing, when no start is spare. Queued, it takes in the text that
    follows; a start that frees up streams it all at once, and the message's end (which
    clears `draft`) or `HOLD_LIMIT` lets it go as an ordinary message. Under load this
    costs Slack's shared `chat.update` budget nothing: a message posted whole is one
    call of the channel's own rate. A start found spare is taken for the entry
    (`Entry.start`), so the first text that asks gets it, not every waiting one."""
    op = entry.op
    if entry.start or not isinstance(op, Send | Edit) or not (op.run and op.draft):
        return False
    if op.task is not None or now - entry.since >= HOLD_LIMIT:
        return False
    if streams.run_of(entry.key) is not None or slots.get(op.slot) is not None:
        return False
    if streams.usable(entry.chat) is None:
        return False
    # Taken now, for this entry: of many waiting, only one goes when a start frees up.
    entry.start = await streams.start_spare(limits, entry.chat)
    return not entry.start


async def run_streamed(
    entry: Entry,
    slots: SlotMap,
    clock: Callable[[], float],
    streams: Streams,
    limits: PlatformLimits,
) -> bool:
    """Carry out `entry`'s op on its run's stream where it belongs there; False when
    the ordinary call of `entry.op` (possibly changed to a Send) is still to be made."""
    op = entry.op
    live = streams.run_of(entry.key)
    if not isinstance(op, Send | Edit | Delete):
        return False
    if isinstance(op, Delete):
        return live is not None and _deleted(live, op.slot, slots)
    if live is not None and (op.run_over or (op.run and op.run != live.run)):
        await close(entry.key, live, slots, streams, limits)
        live = None
    if not op.run or op.run_over or op.buttons:
        return False
    stream = streams.adapter
    if slots.get(op.slot) is not None and (live is None or op.slot not in live.parts):
        return False  # posted as a message (no stream had room for it): edited as one
    if live is None:
        return stream is not None and await _start(entry, op, slots, clock, streams, limits)
    assert stream is not None  # a live run stream was started through it
    if op.task is not None:
        return await _card(stream, entry, live, op.slot, op.task, streams, limits)
    return await _text(stream, entry, live, op, slots, clock, streams, limits)


async def close(
    key: str, live: RunStream, slots: SlotMap, streams: Streams, limits: PlatformLimits
) -> None:
    """Stop the run's stream as it stands and clear the thread's status line. Its text
    slots forget the stream message: a later edit must not replace the whole stream.
    A stop that fails for a while (a rate limit, an outage) leaves the stream open, for
    the retry of the same op to stop."""
    stream = streams.adapter
    if stream is not None:
        try:
            await streams.stop_turn(limits, live.chat)
            await stream.stop_stream(live.ref, "")
        except (StreamEnded, MessageGone):
            pass  # already ended: it shows what it shows
    streams.close_run(key)
    for slot in live.parts:
        slots.forget(slot)
    if stream is not None and live.status:
        await _status(stream, live, "", streams, limits, force=True)


def _deleted(live: RunStream, slot: str, slots: SlotMap) -> bool:
    """A card stays as it last was (it has no message of its own to delete); a text
    part stays in the stream, which cannot take text back."""
    if live.tasks.pop(slot, None) is not None:
        return True
    if live.parts.pop(slot, None) is not None:
        slots.forget(slot)
        return True
    return False


async def _start(
    entry: Entry,
    op: Send | Edit,
    slots: SlotMap,
    clock: Callable[[], float],
    streams: Streams,
    limits: PlatformLimits,
) -> bool:
    stream = streams.usable(entry.chat)
    if stream is None or not (entry.start or await streams.start_spare(limits, entry.chat)):
        return False
    entry.start = True  # taken: a retry after a failed call uses it again
    text = "" if op.task is not None else markdown_of(op)
    first, *rest = pieces(text, limits.max_text) or [""]
    tasks = (op.task,) if op.task is not None else ()
    try:
        ref = await stream.start_stream(entry.chat, first, tasks)
    except PlatformError as exc:
        if not is_refusal(exc):
            raise
        streams.refuse(entry.chat, exc)
        return False
    entry.start = False
    live = RunStream(op.run, entry.chat, ref)
    streams.open_run(entry.key, live)
    if op.task is not None:
        live.tasks[op.slot] = op.task
        await _status(stream, live, _running(op.task), streams, limits)
        return True
    live.parts[op.slot] = first
    slots.bind(op.slot, ref, clock())
    if rest:
        return await _text(stream, entry, live, op, slots, clock, streams, limits)
    return True


async def _text(
    stream: Streaming,
    entry: Entry,
    live: RunStream,
    op: Send | Edit,
    slots: SlotMap,
    clock: Callable[[], float],
    streams: Streams,
    limits: PlatformLimits,
) -> bool:
    markdown, shown = markdown_of(op), live.parts.get(op.slot)
    before = ""
    if shown is None:  # the run's next message
        if not markdown.strip():
            return True
        before = SEPARATOR if not live.empty else ""
        live.parts[op.slot] = shown = ""
    more = extension(shown, markdown)
    if more is None:
        log.info("outbox: a run's text no longer extends its stream; posting it whole")
        await close(entry.key, live, slots, streams, limits)
    elif not more or await _append(stream, entry, live, op.slot, more, (), streams, limits, before):
        slots.bind(op.slot, live.ref, clock())
        return True
    slots.forget(op.slot)
    entry.op = _as_send(op)
    return False


async def _card(
    stream: Streaming,
    entry: Entry,
    live: RunStream,
    slot: str,
    task: Task,
    streams: Streams,
    limits: PlatformLimits,
) -> bool:
    """Show `task` as its card; False when the stream is gone: posted instead."""
    if live.tasks.get(slot) != task:
        if not await _append(stream, entry, live, slot, "", (task,), streams, limits):
            return False
        live.tasks[slot] = task
    status = _running(task) if task.status == "in_progress" else live.status
    if status != live.status:
        await _status(stream, live, status, streams, limits)
    return True


async def _append(
    stream: Streaming,
    entry: Entry,
    live: RunStream,
    slot: str,
    text: str,
    tasks: Sequence[Task],
    streams: Streams,
    limits: PlatformLimits,
    before: str = "",
) -> bool:
    """Append `text` (in pieces the platform takes) and `tasks` to the run's stream,
    noting what went out; a stream the platform ended rolls over to a new one. False
    when that fails: the run has no stream any more."""
    chunks = pieces(before + text, limits.max_text) or [""]
    for i, piece in enumerate(chunks):
        cards = tasks if i == len(chunks) - 1 else ()
        await streams.append_turn(limits, live.chat)
        try:
            await stream.append_stream(live.ref, piece, cards)
        except StreamEnded:
            if not await _roll_over(stream, entry, live, slot, piece, cards, streams, limits):
                return False
        if slot in live.parts:
            live.parts[slot] += piece.removeprefix(before) if i == 0 else piece
    return True


async def _roll_over(
    stream: Streaming,
    entry: Entry,
    live: RunStream,
    slot: str,
    piece: str,
    tasks: Sequence[Task],
    streams: Streams,
    limits: PlatformLimits,
) -> bool:
    """Go on in a new stream: `piece`, with the cards of the calls still running.
    False when none starts (the chat refused it, or its budget or the platform's
    health said no): the run's ops are posted as messages from then on."""
    running = [t for s, t in live.tasks.items() if t.status == "in_progress" and s != slot]
    await streams.start_turn(limits, live.chat)
    try:
        live.ref = await stream.start_stream(live.chat, piece.lstrip("\n"), [*running, *tasks])
    except PlatformError as exc:
        streams.close_run(entry.key)
        if is_refusal(exc):
            streams.refuse(live.chat, exc)
        log.info("outbox: a run's stream ended and no new one started: %s", exc)
        if live.status:
            await _status(stream, live, "", streams, limits, force=True)
        return False
    log.info("outbox: a run's stream ended; it goes on in a new one")
    return True


async def _status(
    stream: Streaming,
    live: RunStream,
    text: str,
    streams: Streams,
    limits: PlatformLimits,
    *,
    force: bool = False,
) -> None:
    """Set the thread's status line; a refusal or a busy budget leaves it be."""
    if live.chat.thread_id is None or not (force or await streams.status_spare(limits, live.chat)):
        return
    try:
        await stream.set_status(live.chat, text)
    except PlatformError as exc:
        log.debug("outbox: thread status not set: %s", exc)
        return
    live.status = text


def _running(task: Task) -> str:
    return f"is running {task.title}…"


def _as_send(op: Send | Edit) -> Send:
    return op if isinstance(op, Send) else as_send(op)

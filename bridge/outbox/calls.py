"""One platform call per op, keeping the conversation's slot map in step with it.

Ops marked `draft` go as drafts (`drafts.py`) or as native streams (`streams.py`)
where the chat takes them, and a run's ops as its stream (`runs.py`); every other
op, and every fallback, is the ordinary call of its kind: `call_of` says which, and
`bridge.platform.perform` makes it, as a frontend makes a worker's (bridge/scale/).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

from bridge.model import AnswerPress, Delete, Edit, MessageRef, React, Send, Upload
from bridge.outbox.drafts import draft_id
from bridge.outbox.refusals import is_refusal
from bridge.outbox.runs import run_streamed
from bridge.outbox.streams import extension, markdown_of, pieces
from bridge.platform import MessageGone, PlatformCall, PlatformError, StreamEnded, perform
from bridge.render.status import run_is_live

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import ChatRef, Op, PlatformLimits
    from bridge.outbox.drafts import Drafts
    from bridge.outbox.lanes import Entry
    from bridge.outbox.pacer import Pacer
    from bridge.outbox.slots import Placed, SlotMap
    from bridge.outbox.streams import Streams
    from bridge.platform import Adapter, Streaming


# The conversation a platform call is made for, for an adapter that must say whose it
# is (a worker's calls through a frontend are fenced by the conversation's lease).
CALLING: ContextVar[str] = ContextVar("CALLING", default="")
# Whether that call shows a run's status live (True: with [⏹ Stop]), over (False), or
# no status (None): a frontend keeps a status over once it made it so (bridge/scale/).
SHOWING: ContextVar[bool | None] = ContextVar("SHOWING", default=None)


async def call(
    adapter: Adapter,
    entry: Entry,
    slot_map: Callable[[str], SlotMap],
    clock: Callable[[], float],
    drafts: Drafts,
    streams: Streams,
) -> None:
    """Carry out `entry`'s op through `adapter`: a Send or Upload binds its slot to the
    new message, a Delete forgets it, an Edit stamps when the message was written; a
    Send marked `draft` in a chat that takes drafts shows a draft and binds nothing;
    in a chat that streams, it starts a stream that later ops of the slot append to,
    stop or leave (`_streamed`). `slot_map` gives a conversation's map, made on first
    use."""
    token, showing = CALLING.set(entry.key), SHOWING.set(run_is_live(entry.op))
    try:
        await _call(adapter, entry, slot_map, clock, drafts, streams)
    finally:
        SHOWING.reset(showing)
        CALLING.reset(token)


async def _call(
    adapter: Adapter,
    entry: Entry,
    slot_map: Callable[[str], SlotMap],
    clock: Callable[[], float],
    drafts: Drafts,
    streams: Streams,
) -> None:
    op = entry.op
    if isinstance(op, AnswerPress | React):
        made = call_of(op, entry.chat)
        await streams.pacer.take(adapter.limits, made.method, entry.chat)
        await perform(adapter, made)
        return
    slots = slot_map(entry.key)  # only ops on messages: a press makes no map
    if await run_streamed(entry, slots, clock, streams, adapter.limits):
        return
    op = entry.op  # a run's text that left its stream is sent whole
    assert not isinstance(op, AnswerPress | React)
    in_run = isinstance(op, Send | Edit) and bool(op.run)
    if not in_run and await _streamed(adapter, entry, slots, clock, streams):
        return
    entry.drafted = isinstance(op, Send) and op.draft and await _drafted(entry, op, drafts)
    if not entry.drafted:
        await _ordinary(adapter, entry, op, slots, clock, streams.pacer)


async def _ordinary(
    adapter: Adapter,
    entry: Entry,
    op: Send | Edit | Delete | Upload,
    slots: SlotMap,
    clock: Callable[[], float],
    pacer: Pacer,
) -> None:
    """The ordinary call of `op`: a Send or Upload binds its slot to the new message,
    a Delete forgets it, an Edit stamps when the message was written. Its method's
    budgets are taken first; an Edit's were taken while it was queued, so that newer
    edits merged into it meanwhile."""
    placed = None
    if isinstance(op, Edit | Delete) and (placed := slots.get(op.slot)) is None:
        raise MessageGone(f"slot {op.slot!r} has no message")  # the worker prevents this
    made_call = call_of(op, entry.chat, placed.ref if placed else None)
    if isinstance(op, Edit):
        pacer.note(made_call.method)
    else:
        await pacer.take(adapter.limits, made_call.method, entry.chat)
    try:
        made = await perform(adapter, made_call)
    finally:
        if isinstance(op, Edit) and placed is not None:
            # The platform times the edit somewhere between our call and its answer;
            # counting the interval from the answer keeps the next edit far enough
            # behind it whatever the network or our event loop delayed (a refused
            # edit counts too). bench/telegram_load.py drew 429s counting from the call.
            placed.written_at = clock()
    if isinstance(op, Send | Upload):
        if not isinstance(made, MessageRef):
            raise PlatformError(f"{type(op).__name__.lower()}: the platform named no message")
        slots.bind(op.slot, made, clock())
    elif isinstance(op, Delete):
        slots.forget(op.slot)


def call_of(op: Op, chat: ChatRef, ref: MessageRef | None = None) -> PlatformCall:
    """The platform call that carries out `op` in `chat`; `ref`: the message of the
    op's slot (an Edit's, a Delete's)."""
    match op:
        case Send():
            return PlatformCall(
                "send",
                chat=chat,
                text=op.text,
                markup=op.markup,
                buttons=op.buttons,
                force_reply=op.force_reply,
                silent=op.silent,
                ping=op.ping,
            )
        case Edit():
            return PlatformCall("edit", ref=ref, text=op.text, markup=op.markup, buttons=op.buttons)
        case Delete():
            return PlatformCall("delete", ref=ref)
        case Upload():
            return PlatformCall(
                "upload", chat=chat, filename=op.filename, data=op.data, text=op.caption
            )
        case AnswerPress():
            return PlatformCall("answer_press", press_id=op.press_id, text=op.text, alert=op.alert)
        case React():
            return PlatformCall("react", chat=chat, message_id=op.message_id, state=op.state)


async def _drafted(entry: Entry, op: Send, drafts: Drafts) -> bool:
    """Show `op` as a draft where the chat takes drafts; False to send it instead.
    A refusal other than a rate limit, an outage, the formatting or the length (which
    the outbox retries or falls back from as for any call) ends drafts in that chat, and the
    same op is sent as a message at once: nothing of the text is lost."""
    adapter = drafts.usable(entry.chat)
    if adapter is None:
        return False
    try:
        await adapter.draft(entry.chat, draft_id(entry.key, op.slot), op.text, markup=op.markup)
    except PlatformError as exc:
        if not is_refusal(exc):
            raise
        drafts.refuse(entry.chat, exc)
        return False
    return True


async def _streamed(
    adapter: Adapter, entry: Entry, slots: SlotMap, clock: Callable[[], float], streams: Streams
) -> bool:
    """Carry out `entry`'s op on the stream path where it belongs there; False when
    the ordinary call of the op (with its full text) is still to be made: no stream,
    a stream just stopped before a Delete, or a text the stream cannot take."""
    op = entry.op
    if isinstance(op, Send):
        return op.draft and await _start(entry, op, slots, clock, streams, adapter.limits)
    if not isinstance(op, Edit | Delete):
        return False
    streamed, placed = streams.streamed(entry.key, op.slot), slots.get(op.slot)
    stream = streams.adapter
    if streamed is None or placed is None or stream is None:
        return False
    more = None if isinstance(op, Delete) or op.buttons else extension(streamed, markdown_of(op))
    try:
        if more is not None and isinstance(op, Edit):
            await _extend(stream, entry, op, placed, more, streams, adapter.limits)
            placed.written_at = clock()
            return True
        await streams.stop_turn(adapter.limits, entry.chat)
        await stream.stop_stream(placed.ref, "")  # ends it as it stands; the edit follows
    except StreamEnded:
        pass  # an ordinary message now: the ordinary call shows the full text
    except MessageGone:
        streams.forget(entry.key, op.slot)
        raise
    streams.forget(entry.key, op.slot)
    return False


async def _start(
    entry: Entry,
    op: Send,
    slots: SlotMap,
    clock: Callable[[], float],
    streams: Streams,
    limits: PlatformLimits,
) -> bool:
    """Start a stream with `op`'s Markdown where the chat streams and the platform's
    start budget has one to spare; False to send it instead. A refusal other than a
    rate limit, an outage, the formatting or the length ends streams in that chat,
    and the same op is sent at once."""
    stream = streams.usable(entry.chat)
    if stream is None or op.buttons or not await streams.start_spare(limits, entry.chat):
        return False
    limit = limits.max_text
    first, *rest = pieces(markdown_of(op), limit) or [""]
    try:
        ref = await stream.start_stream(entry.chat, first)
    except PlatformError as exc:
        if not is_refusal(exc):
            raise
        streams.refuse(entry.chat, exc)
        return False
    slots.bind(op.slot, ref, clock())
    streams.note(entry.key, op.slot, first)
    if rest:
        # The message exists now: a retry must append the rest, not start again.
        entry.op = Edit(op.slot, op.text, plain=op.plain, markup=op.markup, draft=True)
        await _append(stream, entry.key, op.slot, ref, "".join(rest), streams, limits)
    return True


async def _extend(
    stream: Streaming,
    entry: Entry,
    op: Edit,
    placed: Placed,
    more: str,
    streams: Streams,
    limits: PlatformLimits,
) -> None:
    """Append `more` to the slot's stream; an op without `draft` then stops it."""
    if op.draft:
        await _append(stream, entry.key, op.slot, placed.ref, more, streams, limits)
        return
    *before, last = pieces(more, limits.max_text) or [""]
    await _append(stream, entry.key, op.slot, placed.ref, "".join(before), streams, limits)
    await streams.stop_turn(limits, entry.chat)
    await stream.stop_stream(placed.ref, last)
    streams.forget(entry.key, op.slot)


async def _append(
    stream: Streaming,
    key: str,
    slot: str,
    ref: MessageRef,
    more: str,
    streams: Streams,
    limits: PlatformLimits,
) -> None:
    """Append `more` in pieces the platform takes, noting each one that went out."""
    for piece in pieces(more, limits.max_text):
        await streams.append_turn(limits, ref.chat)
        await stream.append_stream(ref, piece)
        streams.note(key, slot, (streams.streamed(key, slot) or "") + piece)

"""One platform call per op, keeping the conversation's slot map in step with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.model import (
    AnswerPress,
    BadFormatting,
    Edit,
    MessageGone,
    PlatformError,
    RateLimited,
    React,
    Send,
    TooLong,
    TransientError,
    Upload,
)
from bridge.outbox.drafts import draft_id

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Adapter
    from bridge.outbox.drafts import Drafts
    from bridge.outbox.lanes import Entry
    from bridge.outbox.slots import SlotMap


async def call(
    adapter: Adapter,
    entry: Entry,
    slot_map: Callable[[str], SlotMap],
    clock: Callable[[], float],
    drafts: Drafts,
) -> None:
    """Carry out `entry`'s op through `adapter`: a Send or Upload binds its slot to the
    new message, a Delete forgets it, an Edit stamps when the message was written; a
    Send marked `draft` in a chat that takes drafts shows a draft and binds nothing.
    `slot_map` gives a conversation's map, made on first use."""
    op = entry.op
    if isinstance(op, AnswerPress):
        await adapter.answer_press(op.press_id, op.text, alert=op.alert)
        return
    if isinstance(op, React):
        await adapter.react(entry.chat, op.message_id, op.state)
        return
    slots = slot_map(entry.key)  # only ops on messages: a press makes no map
    entry.drafted = isinstance(op, Send) and op.draft and await _drafted(entry, op, drafts)
    if entry.drafted:
        return
    if isinstance(op, Send):
        ref = await adapter.send(
            entry.chat,
            op.text,
            markup=op.markup,
            buttons=op.buttons,
            force_reply=op.force_reply,
            silent=op.silent,
        )
        slots.bind(op.slot, ref, clock())
    elif isinstance(op, Upload):
        ref = await adapter.upload(entry.chat, op.filename, op.data, caption=op.caption)
        slots.bind(op.slot, ref, clock())
    elif (placed := slots.get(op.slot)) is None:
        raise MessageGone(f"slot {op.slot!r} has no message")  # the worker prevents this
    elif isinstance(op, Edit):
        try:
            await adapter.edit(placed.ref, op.text, markup=op.markup, buttons=op.buttons)
        finally:
            # The platform times the edit somewhere between our call and its answer;
            # counting the interval from the answer keeps the next edit far enough
            # behind it whatever the network or our event loop delayed (a refused
            # edit counts too). bench/telegram_load.py drew 429s counting from the call.
            placed.written_at = clock()
    else:
        await adapter.delete(placed.ref)
        slots.forget(op.slot)


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
    except (RateLimited, TransientError, BadFormatting, TooLong):
        raise
    except PlatformError as exc:
        drafts.refuse(entry.chat, exc)
        return False
    return True

"""What a platform failure leads to: a pure policy from (op, error, entry state) to an outcome.

`recover` decides only; the worker applies the outcome (counts it, forgets a gone
slot, holds the chat). Retries of transient errors back off (`pacing.TRANSIENT_BACKOFF`), a
rate limit waits out its `retry_after`, and fallbacks change the op itself: plain
text for markup the platform refused, a cut for text over its limit, a Send in
place of an Edit whose message is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bridge.model import Delete, Edit, Send, Upload
from bridge.outbox.pacing import TRANSIENT_BACKOFF
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    RateLimited,
    TooLong,
    TransientError,
)
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from bridge.model import Op, PlatformLimits
    from bridge.outbox.slots import SlotMap
    from bridge.platform import PlatformError


@dataclass(frozen=True, slots=True)
class Retry:
    """Carry out `op` again, possibly changed: plain text, clipped, a Send for an Edit."""

    op: Op
    after: float = 0.0  # seconds the chat holds before retrying
    clipped: bool = False  # `op` is the cut of an op over the length limit
    transient: bool = False  # counts against the entry's transient tries


@dataclass(frozen=True, slots=True)
class GiveUp:
    error: Exception


Outcome = Retry | GiveUp | None  # None: delivered (or nothing left to do)


@dataclass(frozen=True, slots=True)
class Tried:
    """What the policy needs to know of an entry besides its op."""

    adopted: bool = False  # its slot's message came from an earlier bridge process
    clipped: bool = False  # its op was cut to the length limit already
    transient_tries: int = 0


def recover(
    op: Op, exc: PlatformError, tried: Tried, *, limits: PlatformLimits, max_retries: int
) -> Outcome:
    """What to do after `exc` from carrying out `op`: None (counts as delivered), a
    retry, or give up."""
    if isinstance(exc, RateLimited):
        return Retry(op, exc.retry_after)
    if isinstance(exc, NotModified) and isinstance(op, Edit):
        return None
    if isinstance(exc, MessageGone) and isinstance(op, Edit | Delete):
        # An adopted message is edited, never reposted: a new one would speak for
        # something that no longer exists.
        return None if isinstance(op, Delete) or tried.adopted else Retry(as_send(op))
    if isinstance(exc, BadFormatting) and isinstance(op, Send | Edit) and op.markup != "plain":
        return Retry(replace(op, text=op.plain or op.text, plain="", markup="plain"))
    if isinstance(exc, TooLong) and not tried.clipped and (short := clipped(op, limits)):
        return Retry(short, clipped=True)
    if isinstance(exc, TransientError) and tried.transient_tries < max_retries:
        return Retry(op, TRANSIENT_BACKOFF.delay(tried.transient_tries + 1), transient=True)
    return GiveUp(exc)


def clipped(op: Op, limits: PlatformLimits) -> Op | None:
    """`op` cut to the platform's length limit, as plain text; None if not textual."""
    if isinstance(op, Send | Edit):
        text = clip(op.plain or op.text, limits.max_text)
        return replace(op, text=text, plain="", markup="plain")
    if isinstance(op, Upload) and op.caption:
        return replace(op, caption=clip(op.caption, limits.max_caption))
    return None


def as_send(edit: Edit) -> Send:
    """The Send that posts `edit`'s content as a new message."""
    return Send(
        edit.slot,
        edit.text,
        plain=edit.plain,
        markup=edit.markup,
        buttons=edit.buttons,
        draft=edit.draft and not edit.seal,
        run=edit.run,
        task=edit.task,
        run_over=edit.run_over,
    )


def replayed(op: Op, slots: SlotMap | None) -> Op:
    """A Send for a slot whose message an earlier bridge process posted (a run replayed
    after a restart, bridge/reattach.py) as the Edit of that message: nothing is
    posted twice. Not a draft or a stream's part any more: that message is a real one."""
    if not isinstance(op, Send) or slots is None:
        return op
    placed = slots.get(op.slot)
    if placed is None or not placed.adopted:
        return op
    return Edit(op.slot, op.text, plain=op.plain, markup=op.markup, buttons=op.buttons)

"""The `Outbox`: submit, the per-chat workers, and what each platform failure leads to.

See the package docstring for the rules; `lanes`, `slots` and `pacing` hold the
queue, the slot map and the time arithmetic.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio

from bridge.model import (
    AnswerPress,
    BadFormatting,
    Delete,
    Edit,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    React,
    Send,
    TooLong,
    TransientError,
    Upload,
)
from bridge.outbox.lanes import Entry, Lane, kind_of, slot_of
from bridge.outbox.pacing import Budget, backoff, interval
from bridge.outbox.slots import SlotMap
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.model import Adapter, ChatRef, MessageRef, Op, PlatformLimits

    # Told of each op carried out: (conversation key, chat, op, its message or None).
    Observer = Callable[[str, ChatRef, Op, MessageRef | None], Awaitable[None]]

log = logging.getLogger("bridge.outbox")
# Platforms time edits on their side: a call that starts exactly one interval
# after the last can arrive a hair early and draw a 429 (seen with a strict fake).
EDIT_MARGIN = 0.05
# How often a chat holding only routine edits looks for a spare edit again.
SPARE_POLL = 0.25


@dataclass(slots=True)
class OutboxStats:
    """Counters for metrics and tests.

    `calls` counts platform calls by adapter method (failed ones included);
    `retries` every call repeated or replaced after a failure; `coalesced` ops merged
    into or cancelled against a queued op; `deferred` times a routine edit let the
    chat's other ops go first for want of spare edit budget; `dropped` ops never
    carried out, of which `failures` were given up after an error.
    """

    calls: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    rate_limited: int = 0
    rate_limited_calls: Counter[str] = field(default_factory=Counter)  # 429s by method
    coalesced: int = 0
    deferred: int = 0
    dropped: int = 0
    failures: int = 0


class Outbox:
    """Delivers ops per chat in order; the rules are in the package docstring."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        max_retries: int = 5,
    ) -> None:
        self._adapter = adapter
        self._clock = clock
        self._sleep = sleep
        self._max_retries = max_retries
        self._global = Budget(clock, sleep)  # every call, over all chats
        self._edits = Budget(clock, sleep)  # edits over all chats, where the platform says
        self._lanes: dict[str, Lane] = {}
        self._presses = Lane("press answers", paced=False)
        # Apart from press answers: a busy bridge's reactions must not delay a Stop's.
        self._reactions = Lane("reactions", paced=False)
        self._slots: dict[str, SlotMap] = {}
        self._outstanding: Counter[str] = Counter()  # queued or in-flight ops per key
        self._progress: anyio.Event | None = None  # set when any op settles
        self._tg: TaskGroup | None = None
        self._observers: list[Observer] = []
        self.stats = OutboxStats()

    # --- public API ------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; workers run in this task's own task group."""
        if self._tg is not None:
            raise RuntimeError("Outbox.run is already running")
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for lane in (self._presses, self._reactions, *self._lanes.values()):
                    self._start(lane)  # ops submitted before run
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None

    def submit(self, key: str, chat: ChatRef, ops: Sequence[Op]) -> None:
        """Queue `ops` for `chat`; slots are named within the conversation `key`."""
        for op in ops:
            entry = Entry(key, chat, op)
            # Reactions get an unpaced lane too: no message rate, yet in order.
            lane = (
                self._presses
                if isinstance(op, AnswerPress)
                else self._reactions
                if isinstance(op, React)
                else self._lane(chat)
            )
            if not self._absorbed(lane, entry):
                lane.queue.append(entry)
                self._outstanding[key] += 1
            self._start(lane)

    def ref(self, key: str, slot: str) -> MessageRef | None:
        """The platform message of `slot`, once its Send has gone out."""
        slots = self._slots.get(key)
        placed = slots.get(slot) if slots is not None else None
        return placed.ref if placed is not None else None

    def adopt(self, key: str, slot: str, ref: MessageRef) -> None:
        """Name `ref`, a message an earlier bridge process sent, `slot`, so ops can edit it.
        An Edit that finds it gone is dropped, not posted anew: a new message would speak
        for something that no longer exists."""
        self._slot_map(key).bind(slot, ref, -math.inf, adopted=True)

    def observe(self, observer: Observer) -> None:
        """Tell `observer` of every op carried out, with its message (None after a Delete,
        and for press answers and reactions). It runs in the chat's worker before `flush`
        counts the op done, so it sees each chat's ops in order; it should be quick."""
        self._observers.append(observer)

    def slot_for(self, key: str, message_id: str) -> str | None:
        """The slot whose message has `message_id` (a reply to a dialog message)."""
        slots = self._slots.get(key)
        return slots.slot_for(message_id) if slots is not None else None

    def pending(self, key: str) -> int:
        """How many ops of conversation `key` are queued or in flight."""
        return self._outstanding[key]

    def sweep(self, keep: Collection[str]) -> None:
        """Forget what finished chats and conversations left behind: the lanes of chats
        with nothing queued whose pacing is over (the next op there keeps its distance
        all the same), and the slot maps of conversations not in `keep` with nothing
        pending (a conversation made anew starts its slots anew)."""
        now = self._clock()
        for chat_id, lane in list(self._lanes.items()):
            if not lane.queue and not lane.running and _rested(lane, now):
                del self._lanes[chat_id]
        for key in [k for k in self._slots if k not in keep and not self._outstanding[k]]:
            del self._slots[key]

    @property
    def lanes_held(self) -> int:
        """Chats with a lane in memory."""
        return len(self._lanes)

    @property
    def slot_maps_held(self) -> int:
        """Conversations with a slot map in memory."""
        return len(self._slots)

    async def flush(self, key: str | None = None) -> None:
        """Wait until every op submitted so far (for `key`, or all) is delivered or
        given up. Needs `run` to be serving."""
        while self._outstanding[key] if key is not None else self._outstanding.total():
            if self._progress is None:
                self._progress = anyio.Event()
            await self._progress.wait()

    # --- queueing ----------------------------------------------------------------------

    @property
    def _limits(self) -> PlatformLimits:
        return self._adapter.limits  # read on use: an adapter may adjust its limits

    def _lane(self, chat: ChatRef) -> Lane:
        lane = self._lanes.get(chat.chat_id)
        if lane is None:
            lane = self._lanes[chat.chat_id] = Lane(chat.chat_id)
        return lane

    def _slot_map(self, key: str) -> SlotMap:
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = SlotMap()
        return slots

    def _absorbed(self, lane: Lane, entry: Entry) -> bool:
        """Merge `entry` into the queue instead of appending it, where that is safe."""
        op = entry.op
        if isinstance(op, Edit):
            return self._absorb_edit(lane, entry.key, op)
        if isinstance(op, Delete):
            return self._absorb_delete(lane, entry.key, op)
        return False

    def _absorb_edit(self, lane: Lane, key: str, edit: Edit) -> bool:
        prior = lane.last_for(key, edit.slot)
        merged = _with_content(prior.op, edit) if prior is not None else None
        if prior is None or merged is None:
            return False
        prior.renew(merged)
        self.stats.coalesced += 1
        return True

    def _catch_up(self, lane: Lane, entry: Entry) -> None:
        """Before retrying `entry`, take in the newer Edit of its slot that queued behind
        it while it was in flight, so the retry carries the newest content."""
        later = lane.next_for(entry)
        if later is None or not isinstance(later.op, Edit):
            return
        merged = _with_content(entry.op, later.op)
        if merged is not None:
            entry.renew(merged)
            self._discard(lane, later)

    def _absorb_delete(self, lane: Lane, key: str, delete: Delete) -> bool:
        while (prior := lane.last_for(key, delete.slot)) is not None:
            if isinstance(prior.op, Delete):
                break
            self._discard(lane, prior)  # an Edit nobody would see, or a Send never made
            if isinstance(prior.op, Send | Upload):
                self.stats.coalesced += 1  # the Delete itself: nothing is left to delete
                return True
        return False

    def _discard(self, lane: Lane, entry: Entry) -> None:
        lane.queue.remove(entry)
        self.stats.coalesced += 1
        self._settle(entry)

    def _settle(self, entry: Entry) -> None:
        """`entry` has left its queue for good: wake `flush`."""
        self._outstanding[entry.key] -= 1
        if self._outstanding[entry.key] <= 0:
            del self._outstanding[entry.key]
        if self._progress is not None:
            self._progress.set()
            self._progress = None

    def _start(self, lane: Lane) -> None:
        if self._tg is None or lane.running or not lane.queue:
            return
        lane.running = True
        self._tg.start_soon(self._serve, lane, name=f"outbox {lane.name}")

    # --- serving -------------------------------------------------------------------------

    async def _serve(self, lane: Lane) -> None:
        """Work through `lane` until it is empty; `submit` starts a new worker later."""
        try:
            while lane.queue:  # no await between an empty check and `running = False`
                try:
                    entry = await self._await_turn(lane)
                    if entry is not None:
                        await self._carry_out(lane, entry)
                except Exception as exc:  # a bug, not a platform failure
                    if lane.queue:
                        self._drop_head(lane, exc)  # progress past whatever op caused it
        finally:
            lane.running = False

    async def _await_turn(self, lane: Lane) -> Entry | None:
        """Wait until the head of `lane` may go out and return it (still queued, so it
        keeps absorbing newer edits while it waits); None once the lane is empty."""
        while lane.queue:
            head = lane.queue[0]
            if not self._prepare(lane, head):
                continue
            delay = self._ready_at(lane, head) - self._clock()
            if delay > 0:
                await self._sleep(delay)
                continue  # the head may have been merged or cancelled meanwhile
            limits = self._limits
            routine = _routine(head.op)
            if routine and not self._edits.spare(limits.edit_rate, limits.edit_burst):
                # No edit to spare: let the chat's other ops go first, or wait for one.
                if not self._step_aside(lane, head):
                    await self._sleep(SPARE_POLL)
                continue
            await self._global.take(limits.global_rate)
            if isinstance(head.op, Edit) and not routine:
                # Still queued while it waits: newer edits merge into it.
                await self._edits.take(limits.edit_rate, limits.edit_burst)
            if lane.queue and lane.queue[0] is head:
                return head
        return None

    def _step_aside(self, lane: Lane, head: Entry) -> bool:
        """Move a routine Edit at the head behind the rest of its lane, if anything
        there is not routine. Its slot has no other queued op (newer edits merged into
        it), so nothing of its slot is passed; other slots' order is kept."""
        if not any(not _routine(entry.op) for entry in lane.queue if entry is not head):
            return False
        lane.queue.remove(head)
        lane.queue.append(head)
        self.stats.deferred += 1
        return True

    def _prepare(self, lane: Lane, head: Entry) -> bool:
        """Resolve ops on slots without a message: an Edit becomes a Send, a Delete is
        dropped (False). Safe at the head: nothing ahead can still place the slot."""
        op = head.op
        if not isinstance(op, Edit | Delete) or self._slot_map(head.key).get(op.slot) is not None:
            return True
        if isinstance(op, Edit):
            head.op = _as_send(op)
            return True
        self._drop_head(lane, None)
        return False

    def _ready_at(self, lane: Lane, head: Entry) -> float:
        ready = lane.hold_until
        if lane.paced:
            ready = max(ready, lane.next_call_at)
        placed = self._slot_map(head.key).get(head.op.slot) if isinstance(head.op, Edit) else None
        if placed is not None:
            edit_interval = self._limits.edit_interval_in(head.chat)
            ready = max(ready, placed.written_at + edit_interval + EDIT_MARGIN)
        return ready

    async def _carry_out(self, lane: Lane, entry: Entry) -> None:
        entry.in_flight = True
        try:
            outcome = await self._attempt(entry)
        finally:
            entry.in_flight = False
            if lane.paced:
                # From the answer, as for edits: the platform counts a call when it
                # lands, so no delay of this one can squeeze the next into its window
                # (20 a minute in a Telegram group).
                lane.next_call_at = self._clock() + interval(self._limits.chat_rate_in(entry.chat))
        if isinstance(outcome, _Retry):
            self.stats.retries += 1
            entry.op = outcome.op  # stays at the head, so newer edits can merge into it
            self._catch_up(lane, entry)
            lane.hold_until = self._clock() + outcome.after
        elif isinstance(outcome, _GiveUp):
            self._drop_head(lane, outcome.error)
        else:
            lane.queue.popleft()
            try:
                await self._tell(entry)
            finally:
                self._settle(entry)

    async def _tell(self, entry: Entry) -> None:
        slot = slot_of(entry.op)
        ref = self.ref(entry.key, slot) if slot is not None else None
        for observer in self._observers:
            try:
                await observer(entry.key, entry.chat, entry.op, ref)
            except Exception:  # an observer's bug must not stop the chat's delivery
                log.exception("outbox: observer failed on %s of slot %r", kind_of(entry.op), slot)

    def _drop_head(self, lane: Lane, error: Exception | None) -> None:
        entry = lane.queue.popleft()
        self.stats.dropped += 1
        if error is not None:
            self.stats.failures += 1
        _log_drop(lane, entry, error)
        self._settle(entry)

    async def _attempt(self, entry: Entry) -> _Outcome:
        try:
            await self._call(entry)
        except RateLimited as exc:
            self.stats.rate_limited += 1
            self.stats.rate_limited_calls[kind_of(entry.op)] += 1
            return _Retry(entry.op, exc.retry_after)
        except PlatformError as exc:
            return self._recover(entry, exc)
        except Exception as exc:  # a bug in the adapter: drop the op, keep serving
            return _GiveUp(exc)
        return None

    async def _call(self, entry: Entry) -> None:
        """One platform call for `entry`, keeping the slot map in step."""
        op, adapter = entry.op, self._adapter
        self.stats.calls[kind_of(op)] += 1
        if isinstance(op, AnswerPress):
            await adapter.answer_press(op.press_id, op.text, alert=op.alert)
            return
        if isinstance(op, React):
            await adapter.react(entry.chat, op.message_id, op.state)
            return
        slots = self._slot_map(entry.key)  # only ops on messages: a press makes no map
        if isinstance(op, Send):
            ref = await adapter.send(
                entry.chat,
                op.text,
                markup=op.markup,
                buttons=op.buttons,
                force_reply=op.force_reply,
                silent=op.silent,
            )
            slots.bind(op.slot, ref, self._clock())
        elif isinstance(op, Upload):
            ref = await adapter.upload(entry.chat, op.filename, op.data, caption=op.caption)
            slots.bind(op.slot, ref, self._clock())
        elif (placed := slots.get(op.slot)) is None:
            raise MessageGone(f"slot {op.slot!r} has no message")  # `_prepare` prevents this
        elif isinstance(op, Edit):
            try:
                await adapter.edit(placed.ref, op.text, markup=op.markup, buttons=op.buttons)
            finally:
                # The platform times the edit somewhere between our call and its answer;
                # counting the interval from the answer keeps the next edit far enough
                # behind it whatever the network or our event loop delayed (a refused
                # edit counts too). bench/telegram_load.py drew 429s counting from the call.
                placed.written_at = self._clock()
        else:
            await adapter.delete(placed.ref)
            slots.forget(op.slot)

    def _recover(self, entry: Entry, exc: PlatformError) -> _Outcome:
        """What to do after `exc`: None (counts as delivered), a retry, or give up."""
        op = entry.op
        if isinstance(exc, NotModified) and isinstance(op, Edit):
            return None
        if isinstance(exc, MessageGone) and isinstance(op, Edit | Delete):
            slots = self._slot_map(entry.key)
            placed = slots.get(op.slot)
            slots.forget(op.slot)
            if isinstance(op, Delete) or (placed is not None and placed.adopted):
                return None
            return _Retry(_as_send(op))
        if isinstance(exc, BadFormatting) and isinstance(op, Send | Edit) and op.markup != "plain":
            return _Retry(replace(op, text=op.plain or op.text, plain="", markup="plain"))
        if isinstance(exc, TooLong) and not entry.clipped and (short := self._clip(op)):
            entry.clipped = True
            return _Retry(short)
        if isinstance(exc, TransientError) and entry.transient_tries < self._max_retries:
            entry.transient_tries += 1
            return _Retry(op, backoff(entry.transient_tries))
        return _GiveUp(exc)

    def _clip(self, op: Op) -> Op | None:
        """`op` cut to the platform's length limit, as plain text; None if not textual."""
        if isinstance(op, Send | Edit):
            text = clip(op.plain or op.text, self._limits.max_text)
            return replace(op, text=text, plain="", markup="plain")
        if isinstance(op, Upload) and op.caption:
            return replace(op, caption=clip(op.caption, self._limits.max_caption))
        return None


@dataclass(frozen=True, slots=True)
class _Retry:
    op: Op  # possibly changed: plain text, clipped, a Send in place of an Edit
    after: float = 0.0  # seconds the chat holds before retrying


@dataclass(frozen=True, slots=True)
class _GiveUp:
    error: Exception


_Outcome = _Retry | _GiveUp | None  # None: delivered (or nothing left to do)


def _with_content(op: Op, edit: Edit) -> Op | None:
    """A queued Edit or Send of `edit`'s slot, carrying `edit`'s text and buttons
    instead (a Send keeps its notification and reply settings); None for other ops.
    Merged edits are routine only if both were: a wanted change must not wait."""
    if isinstance(op, Edit):
        return edit if op.routine or not edit.routine else replace(edit, routine=False)
    if isinstance(op, Send):
        text, plain, markup, buttons = edit.text, edit.plain, edit.markup, edit.buttons
        return replace(op, text=text, plain=plain, markup=markup, buttons=buttons)
    return None


def _rested(lane: Lane, now: float) -> bool:
    """Whether `lane`'s next call could go out now: its pacing has nothing left to keep."""
    return max(lane.next_call_at, lane.hold_until) <= now


def _routine(op: Op) -> bool:
    return isinstance(op, Edit) and op.routine


def _as_send(edit: Edit) -> Send:
    return Send(edit.slot, edit.text, plain=edit.plain, markup=edit.markup, buttons=edit.buttons)


def _log_drop(lane: Lane, entry: Entry, error: Exception | None) -> None:
    """Logs name the op, slot and chat, never message text (that stays at DEBUG)."""
    what = (kind_of(entry.op), slot_of(entry.op), lane.name)
    if error is None:
        log.info("outbox: dropped %s of slot %r in chat %s: no message", *what)
    elif isinstance(error, PlatformError):
        log.warning("outbox: gave up on %s of slot %r in chat %s: %s", *what, type(error).__name__)
        log.debug("outbox: %s failure detail: %s", what[0], error)
    else:
        log.error("outbox: unexpected error on %s of slot %r in chat %s", *what, exc_info=error)

"""The `Outbox`: submit, the per-chat workers, and how a failure's outcome is applied.

See the package docstring for the rules; `lanes`, `slots` and `pacing` hold the
queue, the slot map and the time arithmetic, `coalesce` the merging of queued ops,
`calls` the adapter call of each op, `recovery` what each platform failure leads
to, `stats` the counters.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from bridge.model import AnswerPress, Delete, Edit, React, Send
from bridge.outbox.calls import call
from bridge.outbox.coalesce import absorb, catch_up, take_in_next
from bridge.outbox.drafts import Drafts
from bridge.outbox.lanes import Entry, Lane, gives_way, is_routine, kind_of, log_drop, slot_of
from bridge.outbox.pacer import LocalRates, Pacer, RateStore, hold_keys, last_method
from bridge.outbox.pacing import Budget, interval
from bridge.outbox.recovery import GiveUp, Outcome, Retry, Tried, as_send, recover, replayed
from bridge.outbox.runs import held
from bridge.outbox.slots import SlotMap
from bridge.outbox.stats import OutboxStats
from bridge.outbox.streams import Streams
from bridge.platform import MessageGone, PlatformError, RateLimited

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.model import ChatRef, MessageRef, Op, PlatformLimits
    from bridge.platform import Adapter

    # Told of each op carried out: (conversation key, chat, op, its message or None).
    Observer = Callable[[str, ChatRef, Op, MessageRef | None], Awaitable[None]]

log = logging.getLogger("bridge.outbox")
# Platforms time edits on their side: a call that starts exactly one interval
# after the last can arrive a hair early and draw a 429 (seen with a strict fake).
EDIT_MARGIN = 0.05
# How often a chat holding only routine edits looks for a spare edit again.
SPARE_POLL = 0.25
# Seconds a run's status gives way to answers where the chat's posts are scarce
# (`Send.gives_way`); past that it takes its turn like any post.
GIVE_WAY_LIMIT = 30.0


class Outbox:
    """Delivers ops per chat in order; the rules are in the package docstring."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        max_retries: int = 5,
        rates: RateStore | None = None,
    ) -> None:
        self._adapter = adapter
        self._clock = clock
        self._sleep = sleep
        self._max_retries = max_retries
        self._global = Budget(clock, sleep)  # every call, over all chats
        # Each method's own budgets (bridge/rates.py), in this process or shared.
        self.pacer = Pacer(rates if rates is not None else LocalRates(clock, sleep), sleep)
        self._lanes: dict[str, Lane] = {}
        self._presses = Lane("press answers", paced=False)
        # Apart from press answers: a busy bridge's reactions must not delay a Stop's.
        self._reactions = Lane("reactions", paced=False)
        self._slots: dict[str, SlotMap] = {}
        self.drafts = Drafts(adapter)
        self.streams = Streams(adapter, self.pacer)
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
            entry = Entry(key, chat, op, since=self._clock())
            # Reactions get an unpaced lane too: no message rate, yet in order.
            lane = (
                self._presses
                if isinstance(op, AnswerPress)
                else self._reactions
                if isinstance(op, React)
                else self._lane(chat)
            )
            merge = absorb(lane, entry)
            self.stats.coalesced += merge.coalesced
            for removed in merge.removed:
                self._settle(removed)
            if not merge.absorbed:
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
            if not lane.queue and not lane.running and lane.rested(now):
                del self._lanes[chat_id]
        for key in [k for k in self._slots if k not in keep and not self._outstanding[k]]:
            del self._slots[key]
            self.streams.drop(key)

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
        name = self._limits.lane_of(chat)
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = Lane(name)
        return lane

    def _slot_map(self, key: str) -> SlotMap:
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = SlotMap()
        return slots

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
                except Exception as exc:  # noqa: BLE001 - a bug, not a platform failure
                    if lane.queue:
                        self._drop_head(lane, exc)  # progress past whatever op caused it
        finally:
            lane.running = False

    async def _await_turn(self, lane: Lane) -> Entry | None:
        """Wait until the head of `lane` may go out and return it (still queued, so it
        keeps absorbing newer edits while it waits); None once the lane is empty."""
        while lane.queue:
            self.pacer.unpaid()  # a token kept for a head that has since changed
            head = lane.queue[0]
            if not self._prepare(lane, head):
                continue
            if await self._held(head):
                if lane.defer(head.key):  # other conversations of the chat go meanwhile
                    self.stats.deferred += 1
                else:
                    # A status that gave way may take a post the held answer leaves.
                    lane.give_way_back()
                    await self._sleep(SPARE_POLL)
                continue
            delay = self._ready_at(lane, head) - self._clock()
            if delay > 0:
                await self._sleep(delay)
                continue  # the head may have been merged or cancelled meanwhile
            if await self._lets_others_go(lane, head) or await self._held_back(lane, head):
                continue
            limits, routine = self._limits, is_routine(head.op)
            await self._global.take(limits.global_rate)
            if not routine:
                await self._budget_queued(head)
            if lane.queue and lane.queue[0] is head:
                return head
        return None

    async def _lets_others_go(self, lane: Lane, head: Entry) -> bool:
        """Whether `head` waits for now, behind the chat's other ops where it may pass
        them: a routine Edit while no edit is spare, a run's status giving way while
        no post is spare (the chat's posts are owed to answers)."""
        limits = self._limits
        if is_routine(head.op):
            if await self.pacer.spare(limits, "edit", head.chat):
                return False
            moved = self._step_aside(lane, head)
        elif self._giving_way(head):
            if await self.pacer.spare_for_next(limits, "send", head.chat):
                return False
            if (later := take_in_next(lane, head)) is not None:
                # Its own slot's next op was what kept it in place: the status goes
                # as its newest line (a run's end: once, never "working…" first).
                self.stats.coalesced += 1
                self._settle(later)
                return True
            moved = lane.give_way(head)
            self.stats.deferred += moved
        else:
            return False
        if not moved:
            await self._sleep(SPARE_POLL)
        return True

    async def _held_back(self, lane: Lane, head: Entry) -> bool:
        """Whether a 429 holds `head`'s method while a run's status waits behind it:
        the status comes first again, to take a post if one is spare meanwhile, and
        the head is tried again after `SPARE_POLL` (its wait would hold the status)."""
        limits = self._limits
        if gives_way(head.op) or not limits.chat_methods:
            return False
        if not any(gives_way(entry.op) for entry in lane.queue):
            return False
        streaming = isinstance(head.op, Edit) and self._streaming(head)
        method = "append_stream" if streaming else kind_of(head.op)
        if await self.pacer.store.held(hold_keys(limits, method, head.chat)) <= 0:
            return False
        lane.give_way_back()
        await self._sleep(SPARE_POLL)
        return True

    def _giving_way(self, head: Entry) -> bool:
        """Whether `head` is a run's status that still gives way to answers."""
        return gives_way(head.op) and self._clock() - head.since < GIVE_WAY_LIMIT

    async def _budget_queued(self, head: Entry) -> None:
        """Take an Edit's budget while it is still queued, so newer edits merge into
        it meanwhile: an edit's, or for text a stream grows by, an append's."""
        if not isinstance(head.op, Edit):
            return
        if not self._streaming(head):
            await self.pacer.take(self._limits, "edit", head.chat)
        elif head.op.draft:
            await self.pacer.prepay(self._limits, "append_stream", head.chat)

    async def _held(self, head: Entry) -> bool:
        if not self.streams.adapter or isinstance(head.op, AnswerPress | React):
            return False  # (a press makes no slot map)
        slots = self._slot_map(head.key)
        return await held(head, slots, self.streams, self._limits, self._clock())

    def _step_aside(self, lane: Lane, head: Entry) -> bool:
        """Move a routine Edit at the head behind the rest of its lane, if anything
        there is not routine. Its slot has no other queued op (newer edits merged into
        it), so nothing of its slot is passed; other slots' order is kept."""
        if not any(not is_routine(entry.op) for entry in lane.queue if entry is not head):
            return False
        lane.queue.remove(head)
        lane.queue.append(head)
        self.stats.deferred += 1
        return True

    def _prepare(self, lane: Lane, head: Entry) -> bool:
        """Resolve ops on slots without a message: an Edit becomes a Send, a Delete is
        dropped (False); a sealing Edit of a slot with a message needs no call (False).
        Safe at the head: nothing ahead can still place the slot."""
        op = head.op = replayed(head.op, self._slots.get(head.key))
        if not isinstance(op, Edit | Delete):
            return True
        placed = self._slot_map(head.key).get(op.slot) is not None
        # The message shows it all already, unless it still streams: then the seal stops it.
        if isinstance(op, Edit) and op.seal and placed and not self._streaming(head):
            lane.queue.popleft()
            self._settle(head)
            return False
        if placed:
            return True
        if isinstance(op, Edit):
            head.op = as_send(op)  # a draft's final text, or a forgotten message's
            return True
        self._drop_head(lane, None)
        return False

    def _streaming(self, entry: Entry) -> bool:
        """Whether `entry`'s op is on a slot whose message still streams: its Edit
        appends to or stops the stream, which takes nothing from the edit budget."""
        slot = slot_of(entry.op)
        return slot is not None and self.streams.streamed(entry.key, slot) is not None

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
            self.pacer.unpaid()
            # A draft is no message in the chat: it does not hold the chat's next
            # message back (its own pace is the renderer's, one per edit interval), so
            # the final message follows the last draft at once.
            # Where the platform paces by method (`chat_methods`), the call took its
            # method's budgets itself: the chat's other threads and methods go on.
            if lane.paced and not entry.drafted and not self._limits.chat_methods:
                # From the answer, as for edits: the platform counts a call when it
                # lands, so no delay of this one can squeeze the next into its window
                # (20 a minute in a Telegram group).
                lane.next_call_at = self._clock() + interval(self._limits.chat_rate_in(entry.chat))
        if isinstance(outcome, Retry):
            self.stats.retries += 1
            entry.op = outcome.op  # stays at the head, so newer edits can merge into it
            entry.clipped = entry.clipped or outcome.clipped
            entry.transient_tries += outcome.transient
            if (later := catch_up(lane, entry)) is not None:
                self.stats.coalesced += 1
                self._settle(later)
            lane.hold_until = self._clock() + outcome.after
        elif isinstance(outcome, GiveUp):
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
        log_drop(lane, entry, error)
        self._settle(entry)

    async def _attempt(self, entry: Entry) -> Outcome:
        self.stats.calls[kind_of(entry.op)] += 1
        log.debug("outbox: %s of slot %r for %s", kind_of(entry.op), slot_of(entry.op), entry.key)
        try:
            await call(self._adapter, entry, self._slot_map, self._clock, self.drafts, self.streams)
        except PlatformError as exc:
            log.debug("outbox: %s for %s failed: %s", kind_of(entry.op), entry.key, type(exc))
            return await self._recover(entry, exc)
        except Exception as exc:  # noqa: BLE001 - an adapter's bug: drop the op
            return GiveUp(exc)
        if isinstance(entry.op, Send | Edit) and not is_routine(entry.op):
            # From the submit of the oldest op merged into it (`Entry.since`).
            self.stats.visible.observe(self._clock() - entry.since)
        return None

    async def _recover(self, entry: Entry, exc: PlatformError) -> Outcome:
        """Note what `exc` tells of the platform, then apply `recover`'s policy."""
        op, adopted = entry.op, False
        if isinstance(exc, RateLimited):
            self.stats.rate_limited += 1
            self.stats.rate_limited_calls[kind_of(op)] += 1
        elif isinstance(exc, MessageGone) and isinstance(op, Edit | Delete):
            slots = self._slot_map(entry.key)
            placed = slots.get(op.slot)
            slots.forget(op.slot)
            adopted = placed is not None and placed.adopted
        tried = Tried(adopted, entry.clipped, entry.transient_tries)
        outcome = recover(op, exc, tried, limits=self._limits, max_retries=self._max_retries)
        by_method = bool(self._limits.chat_methods)
        if isinstance(exc, RateLimited) and isinstance(outcome, Retry) and by_method:
            # Slack limits per method: the wait holds the method that was refused
            # (over the workspace, or the channel's posts), not the chat's lane.
            await self.pacer.hold(self._limits, last_method(), entry.chat, outcome.after)
            return replace(outcome, after=0.0)
        return outcome

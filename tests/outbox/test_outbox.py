"""The outbox delivers each chat's ops in order, paced, merged and recovered.

Everything runs on a `FakeClock` that jumps whenever all tasks are blocked, so the
seconds below are virtual: a test waiting out a 10 s rate limit takes milliseconds.
Platform behaviour comes from `RecordingAdapter`.
"""

from __future__ import annotations

import itertools
import logging
import math
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.model import (
    AnswerPress,
    Button,
    ChatRef,
    Delete,
    Edit,
    PlatformLimits,
    React,
    Send,
    Upload,
)
from bridge.outbox import Outbox
from bridge.outbox.delivery import EDIT_MARGIN
from bridge.platform import MessageGone, NotModified, PlatformError, RateLimited, TransientError
from tests.support.recording_adapter import Call, FakeClock, RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from bridge.model import Op
    from tests.support.recording_adapter import CallKind

    Step = list[Op] | Callable[[RecordingAdapter], None]  # a batch of ops or a script

pytestmark = pytest.mark.anyio

KEY, CHAT = "tg:100", ChatRef("100")
OTHER_KEY, OTHER = "tg:200", ChatRef("200")
REAL_SECONDS = 10  # a test that takes longer than this is stuck, not slow
EPS = 1e-6


@dataclass
class Rig:
    clock: FakeClock
    platform: RecordingAdapter
    outbox: Outbox

    async def deliver(self, *ops: Op, key: str = KEY, chat: ChatRef = CHAT) -> None:
        """Submit `ops` and wait until they are carried out."""
        self.outbox.submit(key, chat, ops)
        await self.outbox.flush()


@asynccontextmanager
async def serving(
    limits: PlatformLimits | None = None, *, max_retries: int = 5, latency: float = 0.0
) -> AsyncIterator[Rig]:
    """An outbox serving a recording platform on fake time."""
    clock = FakeClock()
    platform = RecordingAdapter(limits, clock=clock, sleep=clock.sleep, latency=latency)
    outbox = Outbox(platform, clock=clock, sleep=clock.sleep, max_retries=max_retries)
    with anyio.fail_after(REAL_SECONDS):
        async with anyio.create_task_group() as tg:
            await tg.start(clock.autojump)
            await tg.start(outbox.run)
            yield Rig(clock, platform, outbox)
            tg.cancel_scope.cancel()


def summary(calls: list[Call]) -> list[tuple[str, str]]:
    return [(c.kind, c.text) for c in calls]


# --- order --------------------------------------------------------------------------------


async def test_ops_in_one_chat_go_out_in_the_order_they_were_submitted() -> None:
    async with serving() as rig:
        await rig.deliver(Send("a", "one"), Send("b", "two"), Send("c", "three"))
        rig.outbox.submit(KEY, CHAT, [Edit("b", "two!"), Send("d", "four")])
        rig.outbox.submit(KEY, CHAT, [Delete("a"), Upload("e", "log.txt", b"x", "log")])
        rig.outbox.submit(KEY, CHAT, [Edit("c", "three!")])
        await rig.outbox.flush()
    assert summary(rig.platform.calls) == [
        ("send", "one"),
        ("send", "two"),
        ("send", "three"),
        ("edit", "two!"),
        ("send", "four"),
        ("delete", ""),
        ("upload", "log"),
        ("edit", "three!"),
    ]
    assert rig.platform.texts(CHAT) == ["two!", "three!", "four", "log"]
    assert rig.outbox.stats.calls == {"send": 4, "edit": 2, "delete": 1, "upload": 1}


async def test_ops_submitted_before_run_starts_are_delivered_once_it_runs() -> None:
    clock = FakeClock()
    platform = RecordingAdapter(clock=clock)
    outbox = Outbox(platform, clock=clock, sleep=clock.sleep)
    outbox.submit(KEY, CHAT, [Send("a", "early")])
    with anyio.fail_after(REAL_SECONDS):
        async with anyio.create_task_group() as tg:
            await tg.start(clock.autojump)
            await tg.start(outbox.run)
            await outbox.flush()
            tg.cancel_scope.cancel()
    assert platform.texts(CHAT) == ["early"]


async def test_a_cancelled_run_can_be_started_again_and_finishes_the_queue() -> None:
    clock = FakeClock()
    platform = RecordingAdapter(clock=clock)
    outbox = Outbox(platform, clock=clock, sleep=clock.sleep)
    first_run, first_ended = anyio.CancelScope(), anyio.Event()

    async def run_once() -> None:
        with first_run:
            await outbox.run()
        first_ended.set()

    with anyio.fail_after(REAL_SECONDS):
        async with anyio.create_task_group() as tg:
            await tg.start(clock.autojump)
            tg.start_soon(run_once)
            outbox.submit(KEY, CHAT, [Send(f"s{i}", f"m{i}") for i in range(5)])
            await clock.sleep(2.5)  # three sends out, the rest still queued
            first_run.cancel()
            await first_ended.wait()
            assert len(platform.texts(CHAT)) == 3
            await tg.start(outbox.run)
            await outbox.flush()
            tg.cancel_scope.cancel()
    assert platform.texts(CHAT) == [f"m{i}" for i in range(5)]


# --- merging ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BurstCase:
    edit_interval: float
    step: float  # seconds between submitted edits


@pytest.mark.parametrize(
    "case",
    [BurstCase(1.0, 0.05), BurstCase(3.0, 0.05), BurstCase(0.5, 0.01)],
    ids=lambda c: f"interval {c.edit_interval}s, an edit every {c.step}s",
)
async def test_a_burst_of_edits_reaches_the_platform_at_most_once_per_edit_interval(
    case: BurstCase,
) -> None:
    limits = PlatformLimits(edit_interval=case.edit_interval, chat_rate=20.0)
    async with serving(limits) as rig:
        await rig.deliver(Send("answer", "…"))
        start = rig.clock()
        for i in range(100):
            rig.outbox.submit(KEY, CHAT, [Edit("answer", f"v{i}")])
            await rig.clock.sleep(case.step)
        duration = rig.clock() - start
        await rig.outbox.flush()
    edits = rig.platform.calls_of("edit", ok=True)
    assert len(edits) <= math.ceil(duration / case.edit_interval) + 1
    assert rig.platform.last(CHAT).text == "v99"
    gaps = [b.at - a.at for a, b in itertools.pairwise(edits)]
    assert all(gap >= case.edit_interval - EPS for gap in gaps)
    assert rig.outbox.stats.coalesced == 100 - len(edits)


async def test_an_edit_queued_behind_its_send_is_folded_into_the_send() -> None:
    yes = ((Button("Yes", "t1"),),)
    async with serving() as rig:
        await rig.deliver(
            Send("dialog", "draft", force_reply=True), Edit("dialog", "Allow rm?", buttons=yes)
        )
    assert summary(rig.platform.calls) == [("send", "Allow rm?")]
    message = rig.platform.last(CHAT)
    assert (message.buttons, message.force_reply) == (yes, True)
    assert rig.outbox.stats.coalesced == 1


async def test_a_delete_submitted_before_its_send_went_out_drops_both() -> None:
    async with serving() as rig:
        await rig.deliver(
            Send("a", "gone soon"), Edit("a", "still"), Delete("a"), Send("b", "kept")
        )
    assert summary(rig.platform.calls) == [("send", "kept")]
    assert rig.outbox.stats.coalesced == 3  # the edit, the send and the delete itself
    assert rig.outbox.ref(KEY, "a") is None


async def test_a_delete_arriving_while_its_send_waits_for_pacing_drops_both() -> None:
    async with serving() as rig:
        rig.outbox.submit(KEY, CHAT, [Send("first", "first"), Send("status", "working…")])
        await rig.clock.sleep(0.2)  # "first" is out, "status" waits for the chat's pace
        await rig.deliver(Delete("status"))
    assert summary(rig.platform.calls) == [("send", "first")]


async def test_edits_held_by_a_rate_limit_merge_and_only_the_newest_goes_out() -> None:
    async with serving() as rig:
        await rig.deliver(Send("answer", "start"))
        rig.platform.fail_next("edit", RateLimited(5.0))
        for i in range(21):
            rig.outbox.submit(KEY, CHAT, [Edit("answer", f"v{i}")])
            await rig.clock.sleep(0.2)
        await rig.outbox.flush()
    assert [c.text for c in rig.platform.calls_of("edit", ok=True)] == ["v20"]
    assert rig.outbox.stats.rate_limited == 1


async def test_a_retried_edit_carries_the_newest_text_queued_while_it_was_in_flight() -> None:
    async with serving(latency=0.5) as rig:
        await rig.deliver(Send("answer", "start"))
        rig.platform.fail_next("edit", RateLimited(3.0))
        for i in range(10):  # the first edit is in flight from 1.0 s to 1.5 s
            rig.outbox.submit(KEY, CHAT, [Edit("answer", f"v{i}")])
            await rig.clock.sleep(0.2)
        await rig.outbox.flush()
    assert [c.text for c in rig.platform.calls_of("edit", ok=True)] == ["v9"]


# --- pacing -------------------------------------------------------------------------------


async def test_a_rate_limited_chat_does_not_hold_up_another_chat() -> None:
    async with serving() as rig:
        rig.platform.fail_next("send", RateLimited(10.0), chat=CHAT)
        rig.outbox.submit(KEY, CHAT, [Send("a1", "a1"), Send("a2", "a2")])
        rig.outbox.submit(OTHER_KEY, OTHER, [Send(f"b{i}", f"b{i}") for i in range(3)])
        await rig.outbox.flush()
    sent = rig.platform.calls_of("send", ok=True)
    other = [c.at for c in sent if c.chat == OTHER]
    limited = [c.at for c in sent if c.chat == CHAT]
    assert len(other) == 3
    assert max(other) < 3.0  # paced at one per second, not behind the 10 s wait
    assert limited[0] >= 10.0
    assert rig.platform.texts(CHAT) == ["a1", "a2"]
    assert (rig.outbox.stats.rate_limited, rig.outbox.stats.retries) == (1, 1)


async def test_a_slow_platform_call_in_one_chat_does_not_delay_another_chat() -> None:
    async with serving(latency=5.0) as rig:
        rig.outbox.submit(KEY, CHAT, [Send("a", "a")])
        rig.outbox.submit(OTHER_KEY, OTHER, [Send("b", "b")])
        await rig.outbox.flush()
        assert rig.clock() < 5.5  # both calls were under way at once


async def test_threads_of_one_chat_share_its_order_and_pace() -> None:
    first, second = ChatRef("C1", "thread-1"), ChatRef("C1", "thread-2")
    async with serving() as rig:
        rig.outbox.submit("slack:T:C1:thread-1", first, [Send("a", "one"), Send("b", "two")])
        rig.outbox.submit("slack:T:C1:thread-2", second, [Send("a", "three")])
        await rig.outbox.flush()
    assert [(c.chat, c.text) for c in rig.platform.calls] == [
        (first, "one"),
        (first, "two"),
        (second, "three"),
    ]
    times = [c.at for c in rig.platform.calls]
    assert all(b - a >= 1.0 - EPS for a, b in itertools.pairwise(times))
    assert rig.platform.texts(first) == ["one", "two"]
    assert rig.platform.texts("C1") == ["one", "two", "three"]


async def test_threads_with_limits_of_their_own_are_lanes_of_their_own() -> None:
    # Discord: a thread is a channel, rate-limited apart from its parent and siblings.
    first, second = ChatRef("C1", "thread-1"), ChatRef("C1", "thread-2")
    async with serving(PlatformLimits(thread_lanes=True), latency=5.0) as rig:
        rig.outbox.submit("discord:G:C1:thread-1", first, [Send("a", "one"), Send("b", "two")])
        rig.outbox.submit("discord:G:C1:thread-2", second, [Send("a", "three")])
        await rig.outbox.flush()
        assert rig.clock() < 11.5  # thread-2's call did not wait behind thread-1's two
    assert rig.platform.texts(first) == ["one", "two"]
    assert rig.platform.texts(second) == ["three"]


LANES: list[tuple[PlatformLimits, ChatRef, str]] = [
    (PlatformLimits(), ChatRef("C1"), "C1"),
    (PlatformLimits(), ChatRef("C1", "t1"), "C1"),  # Slack threads, Telegram topics
    (PlatformLimits(thread_lanes=True), ChatRef("C1"), "C1"),
    (PlatformLimits(thread_lanes=True), ChatRef("C1", "t1"), "C1/t1"),  # Discord threads
]


@pytest.mark.parametrize(("limits", "chat", "lane"), LANES)
def test_a_lane_is_the_chat_or_with_thread_lanes_the_thread(
    limits: PlatformLimits, chat: ChatRef, lane: str
) -> None:
    assert limits.lane_of(chat) == lane


async def test_calls_in_one_chat_are_spaced_by_the_chat_rate() -> None:
    async with serving(PlatformLimits(chat_rate=2.0)) as rig:
        await rig.deliver(*(Send(f"s{i}", f"m{i}") for i in range(6)))
    times = [c.at for c in rig.platform.calls]
    assert all(b - a >= 0.5 - EPS for a, b in itertools.pairwise(times))
    assert times[-1] == pytest.approx(2.5, abs=0.1)


# Telegram's numbers: 1 s between edits of a private message; in groups 3 s, 20 a minute.
TELEGRAM_LIKE = PlatformLimits(
    edit_interval=1.0, chat_rate=1.0, group_edit_interval=3.0, group_chat_rate=20 / 60
)
# (chat, least seconds between two edits of its message, most calls in any minute)
CHAT_PACES: list[tuple[ChatRef, float, int | None]] = [
    (ChatRef("100"), 1.0, None),
    (ChatRef("-200", is_group=True), 3.0, 20),
    (ChatRef("-300", "7", is_group=True), 3.0, 20),  # a forum topic paces as its group
    (ChatRef("400", is_group=False), 1.0, None),
]


async def test_group_chats_are_paced_for_groups_and_private_chats_for_private_in_one_run() -> None:
    async with serving(TELEGRAM_LIKE, latency=0.1) as rig:
        for chat, _, _ in CHAT_PACES:
            rig.outbox.submit(f"tg:{chat.chat_id}", chat, [Send("answer", "…")])
        for i in range(300):  # 30 s of an edit every 0.1 s in every chat at once
            for chat, _, _ in CHAT_PACES:
                rig.outbox.submit(f"tg:{chat.chat_id}", chat, [Edit("answer", f"v{i}")])
            await rig.clock.sleep(0.1)
        await rig.outbox.flush()
    for chat, least_gap, per_minute in CHAT_PACES:
        calls = [c for c in rig.platform.calls if c.chat == chat]
        edits = [c.at for c in calls if c.kind == "edit"]
        assert len(edits) >= 30 / least_gap * 0.8, (chat, len(edits))  # paced, not stalled
        assert min(b - a for a, b in itertools.pairwise(edits)) >= least_gap - EPS, chat
        assert rig.platform.last(chat).text == "v299"
        if per_minute is not None:
            times = [c.at for c in calls]
            assert max(sum(1 for t in times if s <= t < s + 60) for s in times) <= per_minute


async def test_calls_over_all_chats_stay_within_the_global_rate() -> None:
    async with serving(PlatformLimits(chat_rate=10.0, global_rate=5.0)) as rig:
        for n in range(20):
            rig.outbox.submit(f"tg:{n}", ChatRef(str(n)), [Send(f"s{i}", "x") for i in range(3)])
        await rig.outbox.flush()
    times = sorted(c.at for c in rig.platform.calls)
    assert len(times) == 60
    busiest = max(sum(1 for t in times if start <= t < start + 1 - EPS) for start in times)
    assert busiest <= 5
    assert times[-1] >= (60 - 1) / 5 - EPS


async def test_edits_over_all_chats_share_the_edit_budget_in_turn() -> None:
    # Slack's chat.update limit is per workspace: ten chats streaming at once get
    # the budget between them, each its turn, the newest text always winning.
    limits = PlatformLimits(chat_rate=10.0, global_rate=100.0, edit_rate=2.0, edit_burst=4)
    chats = [ChatRef(str(n)) for n in range(10)]
    async with serving(limits) as rig:
        for n, chat in enumerate(chats):
            rig.outbox.submit(f"tg:{n}", chat, [Send("answer", "…")])
        await rig.outbox.flush()
        start = rig.clock()
        for i in range(60):  # every chat has a new text every 0.25 s for 15 s
            for n, chat in enumerate(chats):
                rig.outbox.submit(f"tg:{n}", chat, [Edit("answer", f"v{i}")])
            await rig.clock.sleep(0.25)
        await rig.outbox.flush()
    edits = [c.at - start for c in rig.platform.calls_of("edit", ok=True)]
    for t in edits:  # the bucket: at most its 4 plus 2 a second, over any stretch
        assert sum(1 for u in edits if t <= u <= t + 5) <= 4 + 2 * 5 + EPS
    assert all(rig.platform.last(chat).text == "v59" for chat in chats)
    per_chat = [sum(1 for c in rig.platform.calls_of("edit") if c.chat == chat) for chat in chats]
    assert max(per_chat) - min(per_chat) <= 2, per_chat


async def test_routine_status_edits_wait_for_spare_budget_and_the_answers_come_first() -> None:
    # Ten runs at once, each with an answer streaming and a live status whose clock
    # ticks every second: the clock gets only what the answers leave, and each run's
    # final status (not routine) still goes out, after the same budget.
    limits = PlatformLimits(chat_rate=10.0, global_rate=100.0, edit_rate=2.0, edit_burst=4)
    chats = [ChatRef(str(n)) for n in range(10)]
    async with serving(limits) as rig:
        for n, chat in enumerate(chats):
            rig.outbox.submit(f"tg:{n}", chat, [Send("status", "working"), Send("answer", "…")])
        await rig.outbox.flush()
        start = rig.clock()
        for i in range(60):
            for n, chat in enumerate(chats):
                ops: list[Op] = [Edit("answer", f"v{i}")]
                if i % 4 == 0:
                    ops.append(Edit("status", f"working {i // 4} s", routine=True))
                rig.outbox.submit(f"tg:{n}", chat, ops)
            await rig.clock.sleep(0.25)
        for n, chat in enumerate(chats):
            rig.outbox.submit(f"tg:{n}", chat, [Edit("status", "done")])
        await rig.outbox.flush()
    edits = [c for c in rig.platform.calls_of("edit", ok=True) if c.at - start < 15]
    clock = [c for c in edits if c.text.startswith("working")]
    assert len(clock) <= 2, [(c.at - start, c.text) for c in clock]  # the burst, at most
    assert len(edits) - len(clock) >= 2 * 15  # the answers had the rest: 2 a second
    assert rig.outbox.stats.deferred > 0
    everything = [c.at - start for c in rig.platform.calls_of("edit", ok=True)]
    for t in everything:  # routine edits count against the budget like any other
        assert sum(1 for u in everything if t <= u <= t + 5) <= 4 + 2 * 5 + EPS
    for chat in chats:
        shown = {m.text for m in rig.platform.live(chat)}
        assert shown == {"done", "v59"}


@pytest.mark.parametrize("edit_rate", [0.0, 2.0])
async def test_a_routine_edit_goes_at_once_when_the_budget_has_one_to_spare(
    edit_rate: float,
) -> None:
    limits = PlatformLimits(chat_rate=10.0, global_rate=100.0, edit_rate=edit_rate)
    async with serving(limits) as rig:
        await rig.deliver(Send("status", "working"))
        start = rig.clock()
        await rig.deliver(Edit("status", "working 5 s", routine=True))
        (edit,) = rig.platform.calls_of("edit")
    assert edit.at - start <= limits.edit_interval + EDIT_MARGIN + EPS  # the message's pace
    assert rig.outbox.stats.deferred == 0


async def test_a_routine_edit_without_budget_lets_its_chats_next_message_pass() -> None:
    limits = PlatformLimits(chat_rate=10.0, global_rate=100.0, edit_rate=0.5)
    async with serving(limits) as rig:
        await rig.deliver(Send("status", "working"), Send("answer", "…"))
        await rig.deliver(Edit("answer", "spent the budget"))
        rig.outbox.submit(KEY, CHAT, [Edit("status", "working 5 s", routine=True)])
        rig.outbox.submit(KEY, CHAT, [Send("tool", "🔧 bash ls")])
        await rig.outbox.flush()
    order = [c.text for c in rig.platform.calls][-2:]
    assert order == ["🔧 bash ls", "working 5 s"]


async def test_a_wanted_edit_merged_with_a_routine_one_does_not_wait_for_spare_budget() -> None:
    # Three other chats keep the budget busy; a status change that matters (say, the
    # Stop button gone) with a clock tick merged into it still gets its turn.
    limits = PlatformLimits(chat_rate=10.0, global_rate=100.0, edit_rate=1.0)
    others = [(f"tg:{n}", ChatRef(str(n))) for n in range(200, 203)]
    async with serving(limits) as rig:
        await rig.deliver(Send("status", "working"))
        for key, chat in others:
            await rig.deliver(Send("answer", "…"), key=key, chat=chat)
        start = rig.clock()
        for i in range(40):
            for key, chat in others:
                rig.outbox.submit(key, chat, [Edit("answer", f"v{i}")])
            if i == 10:  # the others owe the budget by now
                rig.outbox.submit(KEY, CHAT, [Edit("status", "stopping")])
                rig.outbox.submit(KEY, CHAT, [Edit("status", "working 5 s", routine=True)])
            await rig.clock.sleep(0.5)
        await rig.outbox.flush()
    (edit,) = [c for c in rig.platform.calls_of("edit") if c.chat == CHAT]
    assert edit.text == "working 5 s"
    assert edit.at - start < 10  # in turn with the other chats, not after their streams


async def test_sends_and_wanted_edits_are_timed_from_their_first_submit_to_being_shown() -> None:
    limits = PlatformLimits(edit_interval=1.0, chat_rate=10.0)
    async with serving(limits, latency=0.5) as rig:  # every call takes 0.5 s
        await rig.deliver(Send("answer", "…"))  # submitted at 0, shown at 0.5
        rig.outbox.submit(KEY, CHAT, [Edit("answer", "v1")])  # at 0.5: waits for 1.55
        await rig.clock.sleep(0.25)
        await rig.deliver(Edit("answer", "v2"))  # merged into v1, which keeps its 0.5
        await rig.deliver(Edit("answer", "v2 (5 s)", routine=True))  # nobody waits for it
    shown = 0.5 + 1.0 + EDIT_MARGIN + 0.5  # the edit interval from the send's answer, +0.5 s
    edits = rig.platform.calls_of("edit", ok=True)
    assert [c.text for c in edits] == ["v2", "v2 (5 s)"]
    assert [c.at for c in edits] == pytest.approx([shown, shown + 1.0 + EDIT_MARGIN + 0.5])
    visible = rig.outbox.stats.visible
    # The send: 0.5 s; the edit: from v1's submit at 0.5 to its answer, 1.55 s.
    assert visible.count == 2
    assert visible.total == pytest.approx(0.5 + (shown - 0.5))
    assert visible.cumulative()[6:9] == [("0.5", 1), ("1", 1), ("2.5", 2)]


async def test_a_press_is_answered_ahead_of_the_chats_queued_and_rate_limited_messages() -> None:
    async with serving() as rig:
        rig.platform.fail_next("send", RateLimited(20.0))
        rig.outbox.submit(KEY, CHAT, [Send(f"s{i}", f"m{i}") for i in range(5)])
        await rig.clock.sleep(0.1)
        rig.outbox.submit(KEY, CHAT, [AnswerPress("press-1", "Stopping…")])
        await rig.outbox.flush()
    (answer,) = rig.platform.calls_of("answer_press")
    assert answer.at < 1.0
    assert rig.platform.answers == [("press-1", "Stopping…", False)]
    assert len(rig.platform.texts(CHAT)) == 5


async def test_reactions_keep_their_order_without_waiting_behind_the_chats_messages() -> None:
    async with serving() as rig:
        rig.platform.fail_next("send", RateLimited(20.0))
        rig.outbox.submit(KEY, CHAT, [Send("s0", "m0"), React("u1", "working")])
        await rig.clock.sleep(0.1)
        rig.outbox.submit(KEY, CHAT, [React("u1", "done")])
        await rig.outbox.flush()
    assert rig.platform.reactions == [("u1", "working"), ("u1", "done")]
    assert all(c.at < 1.0 for c in rig.platform.calls_of("react"))
    assert rig.outbox.stats.calls["react"] == 2


@pytest.mark.parametrize(
    ("failures", "max_retries", "gaps"),
    [
        (3, 5, [0.5, 1.0, 2.0]),
        (9, 10, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]),
    ],
    ids=["back-off doubles from half a second", "back-off is capped at 30 seconds"],
)
async def test_transient_errors_are_retried_with_exponential_back_off(
    failures: int, max_retries: int, gaps: list[float]
) -> None:
    async with serving(PlatformLimits(chat_rate=100.0), max_retries=max_retries) as rig:
        rig.platform.fail_next("send", TransientError("timeout"), times=failures)
        await rig.deliver(Send("a", "hi"))
    times = [c.at for c in rig.platform.calls]
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx(gaps, abs=0.02)
    assert rig.platform.texts(CHAT) == ["hi"]
    assert rig.outbox.stats.retries == failures


# --- recovery -----------------------------------------------------------------------------


def vanish_last(platform: RecordingAdapter) -> None:
    platform.vanish(platform.last(CHAT).ref)


def reject_formatting(platform: RecordingAdapter) -> None:
    platform.reject_formatted = True


def fails(kind: CallKind, error: Exception, times: int = 1) -> Callable[[RecordingAdapter], None]:
    def script(platform: RecordingAdapter) -> None:
        platform.fail_next(kind, error, times=times)

    return script


@dataclass(frozen=True)
class RecoveryCase:
    name: str
    steps: list[Step]  # op batches (each delivered before the next) and platform scripts
    texts: list[str]  # the chat's live messages afterwards
    stats: dict[str, int] = field(default_factory=dict)  # OutboxStats fields to check
    limits: PlatformLimits = field(default_factory=PlatformLimits)


FORMATTED = Send("a", "<b>hi</b>", plain="hi", markup="formatted")
RECOVERY_CASES = [
    RecoveryCase(
        "an edit that changes nothing counts as delivered",
        [[Send("a", "same")], [Edit("a", "same")]],
        ["same"],
        {"failures": 0, "dropped": 0, "retries": 0},
    ),
    RecoveryCase(
        "a formatted send the platform rejects is delivered as plain text",
        [reject_formatting, [FORMATTED]],
        ["hi"],
        {"retries": 1, "failures": 0},
    ),
    RecoveryCase(
        "a rejected formatted send without plain text is delivered as its text",
        [reject_formatting, [Send("a", "<b>hi</b>", markup="formatted")]],
        ["<b>hi</b>"],
    ),
    RecoveryCase(
        "a formatted edit the platform rejects is delivered as plain text",
        [[Send("a", "v1")], reject_formatting, [Edit("a", "<i>v2</i>", "v2", "formatted")]],
        ["v2"],
    ),
    RecoveryCase(
        "a send over the length limit is cut to it with an ellipsis",
        [[Send("a", "x" * 25)]],
        ["x" * 9 + "…"],
        {"retries": 1},
        PlatformLimits(max_text=10),
    ),
    RecoveryCase(
        "an edit over the length limit is cut to it with an ellipsis",
        [[Send("a", "short")], [Edit("a", "y" * 25)]],
        ["y" * 9 + "…"],
        limits=PlatformLimits(max_text=10),
    ),
    RecoveryCase(
        "an upload caption over the limit is cut to it with an ellipsis",
        [[Upload("f", "out.txt", b"data", caption="a long caption")]],
        ["a lo…"],
        {"retries": 1},
        PlatformLimits(max_caption=5),
    ),
    RecoveryCase(
        "an edit of a message deleted on the platform sends a new one",
        [[Send("a", "v1")], vanish_last, [Edit("a", "v2")]],
        ["v2"],
        {"failures": 0},
    ),
    RecoveryCase(
        "a delete of a message already gone counts as delivered",
        [[Send("a", "v1")], vanish_last, [Delete("a")]],
        [],
        {"failures": 0, "dropped": 0},
    ),
    RecoveryCase(
        "a rate-limited send is retried after the wait",
        [fails("send", RateLimited(3.0)), [Send("a", "hi")]],
        ["hi"],
        {"rate_limited": 1, "retries": 1},
    ),
    RecoveryCase(
        "transient errors are retried until the send goes through",
        [fails("send", TransientError("502"), times=5), [Send("a", "hi")]],
        ["hi"],
        {"retries": 5, "failures": 0},
    ),
    RecoveryCase(
        "transient errors past max_retries give up and the next op still goes out",
        [fails("send", TransientError("502"), times=6), [Send("a", "lost"), Send("b", "next")]],
        ["next"],
        {"retries": 5, "failures": 1, "dropped": 1},
    ),
    RecoveryCase(
        "an unexpected exception in the adapter drops the op and the worker keeps serving",
        [
            fails("edit", RuntimeError("adapter bug")),
            [Send("a", "v1")],
            [Edit("a", "v2")],
            [Send("b", "next")],
        ],
        ["v1", "next"],
        {"failures": 1, "dropped": 1},
    ),
    RecoveryCase(
        "a permanent failure drops the op and the next op still goes out",
        [fails("send", PlatformError("bot was blocked")), [Send("a", "x"), Send("b", "y")]],
        ["y"],
        {"failures": 1, "dropped": 1},
    ),
    RecoveryCase(
        "an edit of a slot whose send failed becomes a send",
        [fails("send", PlatformError("forbidden")), [Send("a", "v1")], [Edit("a", "v2")]],
        ["v2"],
        {"failures": 1},
    ),
    RecoveryCase(
        "a delete of a slot whose send failed is dropped without a call",
        [fails("send", PlatformError("forbidden")), [Send("a", "v1")], [Delete("a")]],
        [],
        {"failures": 1, "dropped": 2},
    ),
]


@pytest.mark.parametrize("case", RECOVERY_CASES, ids=lambda c: c.name)
async def test_platform_failures_are_recovered_or_dropped(case: RecoveryCase) -> None:
    async with serving(case.limits) as rig:
        for step in case.steps:
            if callable(step):
                step(rig.platform)
            else:
                await rig.deliver(*step)
    assert rig.platform.texts(CHAT) == case.texts
    for name, expected in case.stats.items():
        assert getattr(rig.outbox.stats, name) == expected, name


async def test_an_edit_that_changes_nothing_is_sent_once_and_not_retried() -> None:
    async with serving() as rig:
        await rig.deliver(Send("a", "same"))
        await rig.deliver(Edit("a", "same"))
    (edit,) = rig.platform.calls_of("edit")
    assert isinstance(edit.error, NotModified)


async def test_a_message_gone_on_edit_is_sent_again_and_its_slot_remapped() -> None:
    async with serving() as rig:
        await rig.deliver(Send("dialog", "pick one"))
        old = rig.outbox.ref(KEY, "dialog")
        assert old is not None
        rig.platform.vanish(old)
        await rig.deliver(Edit("dialog", "pick one (2 min left)"))
    new = rig.outbox.ref(KEY, "dialog")
    assert new is not None
    assert new != old
    assert rig.platform.last(CHAT).ref == new
    assert rig.outbox.slot_for(KEY, new.message_id) == "dialog"
    assert rig.outbox.slot_for(KEY, old.message_id) is None
    assert isinstance(rig.platform.calls_of("edit")[0].error, MessageGone)


async def test_failures_are_logged_without_the_message_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="bridge.outbox")
    async with serving() as rig:
        rig.platform.fail_next("send", PlatformError("chat not found"))
        rig.platform.fail_next("edit", RuntimeError("adapter bug"))
        await rig.deliver(Send("a", "secret plan"), Send("b", "secret two"))
        await rig.deliver(Edit("b", "secret three"))
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelname for r in loud] == ["WARNING", "ERROR"]
    assert all("secret" not in r.getMessage() for r in loud)
    assert "'a'" in loud[0].getMessage()  # the slot, so an operator can tell what failed


# --- lookups and flush ----------------------------------------------------------------------


async def test_slot_for_finds_the_slot_of_a_sent_message_within_its_conversation() -> None:
    async with serving() as rig:
        await rig.deliver(Send("status", "working…"), Send("dialog:7", "Reply with a name"))
        ref = rig.outbox.ref(KEY, "dialog:7")
        assert ref is not None
        assert rig.outbox.slot_for(KEY, ref.message_id) == "dialog:7"
        assert rig.outbox.slot_for(OTHER_KEY, ref.message_id) is None
        assert rig.outbox.slot_for(KEY, "no such message") is None
        await rig.deliver(Delete("dialog:7"))
        assert rig.outbox.slot_for(KEY, ref.message_id) is None
        assert rig.outbox.ref(KEY, "dialog:7") is None


async def test_flush_returns_only_once_everything_submitted_is_delivered() -> None:
    async with serving() as rig:
        rig.outbox.submit(KEY, CHAT, [Send(f"s{i}", f"m{i}") for i in range(5)])
        rig.outbox.submit(OTHER_KEY, OTHER, [Send("x", "other")])
        await rig.outbox.flush()
        assert rig.platform.texts(CHAT) == [f"m{i}" for i in range(5)]
        assert rig.platform.texts(OTHER) == ["other"]
        assert rig.clock() >= 4.0  # five sends paced one per second


async def test_flush_of_one_conversation_does_not_wait_for_the_others() -> None:
    async with serving() as rig:
        rig.outbox.submit(OTHER_KEY, OTHER, [Send(f"s{i}", f"m{i}") for i in range(5)])
        rig.outbox.submit(KEY, CHAT, [Send("a", "quick")])
        await rig.outbox.flush(KEY)
        assert rig.platform.texts(CHAT) == ["quick"]
        assert len(rig.platform.texts(OTHER)) < 5
        await rig.outbox.flush()
        assert len(rig.platform.texts(OTHER)) == 5


async def test_flush_with_nothing_submitted_returns_at_once() -> None:
    async with serving() as rig:
        await rig.outbox.flush()
        await rig.outbox.flush("tg:unknown")
    assert rig.platform.calls == []


# --- the recording adapter itself -------------------------------------------------------------


async def test_the_recording_adapter_numbers_messages_per_chat_and_refuses_like_one() -> None:
    platform = RecordingAdapter(PlatformLimits(max_text=5))
    first = await platform.send(CHAT, "a")
    second = await platform.send(CHAT, "b")
    elsewhere = await platform.send(OTHER, "c")
    assert (first.message_id, second.message_id, elsewhere.message_id) == ("1", "2", "1")
    with pytest.raises(NotModified):
        await platform.edit(first, "a")
    await platform.edit(first, "a", buttons=((Button("Go", "t"),),))  # buttons changed
    await platform.delete(second)
    with pytest.raises(MessageGone):
        await platform.edit(second, "b2")
    with pytest.raises(PlatformError):
        await platform.send(CHAT, "too long")
    assert platform.texts(CHAT) == ["a"]
    assert platform.find("a").edits == ["a"]
    assert [c.ok for c in platform.calls_of("edit")] == [False, True, False]


async def test_the_recording_adapter_fails_on_cue_for_the_given_chat_and_count() -> None:
    platform = RecordingAdapter()
    platform.fail_next("send", TransientError("502"), times=2, chat=OTHER)
    await platform.send(CHAT, "unaffected")
    for _ in range(2):
        with pytest.raises(TransientError):
            await platform.send(OTHER, "x")
    await platform.send(OTHER, "through")
    assert platform.texts("200") == ["through"]
    assert platform.format("abcdefg", 3) == ["abc", "def", "g"]


async def test_wait_for_returns_once_a_call_makes_the_condition_true() -> None:
    platform = RecordingAdapter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(platform.wait_for, lambda: bool(platform.answers), 5.0)
        await anyio.lowlevel.checkpoint()
        await platform.answer_press("p", "ok")
    assert platform.answers == [("p", "ok", False)]
    with pytest.raises(AssertionError, match="not reached"):
        await platform.wait_for(lambda: False, timeout=0.05)


async def test_sweep_drops_the_lanes_of_finished_chats_once_their_pacing_is_over() -> None:
    async with serving(PlatformLimits(chat_rate=1.0)) as rig:
        await rig.deliver(Send("a", "hi"))
        await rig.deliver(Send("b", "there"), key=OTHER_KEY, chat=OTHER)
        rig.outbox.sweep(keep={KEY, OTHER_KEY})
        assert rig.outbox.lanes_held == 2  # each chat's next op must still keep its distance
        await rig.clock.sleep(1.0)
        rig.outbox.sweep(keep={KEY, OTHER_KEY})
        assert rig.outbox.lanes_held == 0
        await rig.deliver(Send("c", "again"))  # a new lane serves the chat as before
        assert rig.platform.texts(CHAT) == ["hi", "again"]


async def test_sweep_drops_the_slot_maps_of_conversations_no_longer_kept() -> None:
    async with serving() as rig:
        await rig.deliver(Send("a", "hi"))
        await rig.deliver(Send("b", "there"), key=OTHER_KEY, chat=OTHER)
        await rig.deliver(AnswerPress("p1", "done"), key="tg:300", chat=ChatRef("300"))
        assert rig.outbox.slot_maps_held == 2  # a press answer places no message
        rig.outbox.sweep(keep={KEY})
        assert rig.outbox.slot_maps_held == 1
        assert rig.outbox.ref(KEY, "a") is not None
        assert rig.outbox.ref(OTHER_KEY, "b") is None

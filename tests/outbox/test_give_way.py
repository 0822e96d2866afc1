"""A run's status gives way to answers where a channel's posts are scarce (`Send.gives_way`).

Slack paces `chat.postMessage` at one a second per channel over all its threads
(`PlatformLimits.chat_methods`). When many threads of one channel open runs at once,
each run's status ("⏳ working…" with its Stop button) would take a post before its
answer could; with `gives_way` a status is posted only with a post to spare, after
the answers owed one, for at most `GIVE_WAY_LIMIT`, and whatever it was edited to
meanwhile is what it shows when it goes. A chat without a per-chat post budget, or a
quiet channel, sees no difference.

Driven through a real `Outbox` on fake time against the in-memory platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from bridge.model import Button, ChatRef, Delete, Edit, PlatformLimits, Send
from bridge.outbox.delivery import GIVE_WAY_LIMIT
from bridge.platform import RateLimited
from tests.support.marked_ops import serving
from tests.support.recording_adapter import FakeClock, RecordingAdapter, StreamingAdapter

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Op

pytestmark = pytest.mark.anyio

STOP = ((Button("⏹ Stop", "t"),),)
# One post a second per channel after a burst of one; everything else unlimited.
SCARCE = PlatformLimits(
    chat_rate=1.0, chat_burst=1, chat_methods=frozenset({"send", "upload"}), thread_lanes=True
)
# Paced per chat as Telegram is (one queue, no per-chat post budget to spare or not).
PER_CHAT = PlatformLimits(chat_rate=1.0)


def status(n: int, text: str = "⏳ working…", *, gives_way: bool = True) -> Send:
    return Send(f"status:{n}", text, buttons=STOP, silent=True, gives_way=gives_way)


def answer(n: int, text: str = "") -> Send:
    return Send(f"text:{n}:1:0", text or f"answer {n}")


def thread(n: int) -> tuple[str, ChatRef]:
    return f"slack:T1:C1:{n}.0", ChatRef("C1", thread_id=f"{n}.0")


def posts(platform: RecordingAdapter) -> list[str]:
    """The texts of the channel's posts, in the order they were made."""
    return [c.text for c in platform.calls_of("send", ok=True)]


@dataclass(frozen=True)
class Case:
    name: str
    limits: PlatformLimits
    threads: int
    # The posts in the order made, in groups whose order among themselves is the
    # threads' race.
    order: list[set[str] | str]


CASES = [
    # One thread: its status has the post to spare and goes first, as always.
    Case("a quiet channel", SCARCE, 1, ["⏳ working…", "answer 1"]),
    # Four at once: the first status takes the one post there is; the other three
    # find it owed and let the answers go first.
    Case(
        "four threads at once",
        SCARCE,
        4,
        ["⏳ working…", {"answer 1", "answer 2", "answer 3", "answer 4"}, *["⏳ working…"] * 3],
    ),
    # Paced per chat (no budget per method): each thread's order as submitted.
    Case(
        "a platform paced per chat",
        PER_CHAT,
        2,
        ["⏳ working…", "answer 1", "⏳ working…", "answer 2"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_statuses_give_way_to_answers_only_where_posts_are_scarce(case: Case) -> None:
    clock = FakeClock()
    platform = RecordingAdapter(case.limits, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        for n in range(1, case.threads + 1):
            key, chat = thread(n)
            outbox.submit(key, chat, [status(n), answer(n)])
        await outbox.flush()
    made, at = posts(platform), 0
    for group in case.order:
        size = len(group) if isinstance(group, set) else 1
        assert (set(made[at : at + size]) if isinstance(group, set) else made[at]) == group
        at += size
    assert at == len(made)


async def threads_posting(runs: int, ops: Callable[[int], list[Op]]) -> RecordingAdapter:
    """`runs` threads of one channel submit `ops(n)` at once; the platform when all is done."""
    clock = FakeClock()
    platform = RecordingAdapter(SCARCE, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        for n in range(1, runs + 1):
            outbox.submit(*thread(n), ops(n))
        await outbox.flush()
    return platform


async def test_without_the_mark_four_threads_post_their_statuses_first() -> None:
    # The control of the case above: what the mark changes.
    platform = await threads_posting(4, lambda n: [status(n, gives_way=False), answer(n)])
    assert posts(platform)[:4] == ["⏳ working…"] * 4


async def test_a_waiting_status_goes_with_what_it_was_edited_to_and_is_never_posted_twice() -> None:
    # The run ends before its status went out: the final line (no Stop) is queued
    # behind the answer, as the renderer's run_over edit is.
    platform = await threads_posting(
        3,
        lambda n: [status(n), answer(n), Edit(f"status:{n}", f"✅ done {n}", run_over=True)],
    )
    made = posts(platform)
    assert sorted(made[:4]) == ["answer 1", "answer 2", "answer 3", "⏳ working…"]
    # Threads 2 and 3 show their final line once, never "working…" with a Stop.
    assert made.count("⏳ working…") == 1
    for n in (2, 3):
        assert made.count(f"✅ done {n}") == 1
        assert made.index(f"answer {n}") < made.index(f"✅ done {n}")
    assert [c.text for c in platform.calls_of("edit")] == ["✅ done 1"]


async def test_a_status_waits_at_most_the_limit_while_answers_keep_coming() -> None:
    clock = FakeClock()
    platform = RecordingAdapter(SCARCE, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        key, chat = thread(1)
        outbox.submit(key, chat, [answer(1)])  # takes the one post there is
        outbox.submit(*thread(2), [status(2)])
        # Neighbours post a new message each time one is allowed: the channel's posts
        # stay owed for longer than the limit.
        for n in range(3, 3 + int(GIVE_WAY_LIMIT) + 10):
            outbox.submit(*thread(n), [answer(n)])
            await clock.sleep(1.0)
        await outbox.flush()
    [posted] = [c for c in platform.calls_of("send") if c.text == "⏳ working…"]
    assert GIVE_WAY_LIMIT <= posted.at <= GIVE_WAY_LIMIT + 2.0


async def test_a_status_takes_a_post_its_answer_leaves_while_waiting_for_a_stream() -> None:
    # The answer waits for a stream start (none to spare); the channel's posts are
    # idle meanwhile, and the status that gave way takes one instead of waiting too.
    clock = FakeClock()
    limits = PlatformLimits(
        chat_rate=1.0,
        chat_burst=1,
        chat_methods=frozenset({"send", "upload"}),
        thread_lanes=True,
        edit_interval=0.0,
        stream_rate=1 / 600,
        stream_burst=1,
    )
    platform = StreamingAdapter(limits, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        key1, chat1 = thread(1)
        # Thread 1 takes the only stream start, and then the only post.
        outbox.submit(key1, chat1, [Send("text:1:1:0", "one", draft=True, run="run:1")])
        outbox.submit(key1, chat1, [answer(9, "notice")])
        await outbox.flush()
        key2, chat2 = thread(2)
        outbox.submit(key2, chat2, [status(2), Send("text:2:1:0", "two", draft=True, run="run:1")])
        await clock.sleep(5.0)
        mine = [(c.kind, c.text) for c in platform.calls if c.chat == chat2]
        assert mine == [("send", "⏳ working…")]  # shown while its answer waits
        outbox.submit(key2, chat2, [Edit("text:2:1:0", "two", seal=True, run="run:1")])
        await outbox.flush()
    assert [(c.kind, c.text) for c in platform.calls if c.chat == chat2][-1] == ("send", "two")


async def test_a_status_behind_an_op_held_by_a_429_takes_a_spare_post_meanwhile() -> None:
    # The op the status gave way to is refused with a Retry-After: its method waits,
    # and the status, which needs none of it, goes when a post is spare.
    clock = FakeClock()
    platform = RecordingAdapter(SCARCE, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        key, chat = thread(1)
        outbox.submit(key, chat, [Send("notice:1", "note")])  # the one post there is
        await outbox.flush()
        platform.fail_next("delete", RateLimited(10.0))
        outbox.submit(key, chat, [status(1), Delete("notice:1")])
        await outbox.flush()
    [posted] = [c for c in platform.calls_of("send") if c.text == "⏳ working…"]
    assert posted.at < 2.0  # the next post, not the end of the hold
    [deleted] = platform.calls_of("delete", ok=True)
    assert deleted.at >= 10.0

"""The pacing core (bridge/rates.py): which budgets a call takes from, and the token
bucket's arithmetic; and the outbox's `Pacer` on it (bridge/outbox/pacer.py), on fake
time."""

from __future__ import annotations

import math

import pytest

from adapters.slack.adapter import LIMITS as SLACK
from bridge.model import ChatRef, PlatformLimits
from bridge.outbox.pacer import LocalRates, Pacer, hold_keys, last_method
from bridge.rates import Rate, TokenBucket, rates_for
from tests.support.purity import forbidden_loads, pure_cores

TELEGRAM_LIKE = PlatformLimits(chat_rate=1.0, global_rate=30.0, group_chat_rate=1 / 3)
CHANNEL = ChatRef("C1")
THREAD = ChatRef("C1", "171.1")
OTHER_THREAD = ChatRef("C1", "171.2")


@pytest.mark.parametrize(
    ("limits", "method", "chat", "expected"),
    [
        # Slack: only posts (and uploads, which post) are paced per channel, by the
        # channel whatever the thread.
        pytest.param(SLACK, "send", THREAD, [Rate("send:C1", 1.0, 2)], id="slack-post-per-channel"),
        pytest.param(SLACK, "send", OTHER_THREAD, [Rate("send:C1", 1.0, 2)], id="same-channel"),
        pytest.param(SLACK, "upload", CHANNEL, [Rate("upload:C1", 1.0, 2)], id="slack-upload"),
        pytest.param(SLACK, "edit", THREAD, [Rate("edit", 50 / 60, 10)], id="slack-update-tier3"),
        pytest.param(
            SLACK, "append_stream", THREAD, [Rate("append_stream", 100 / 60, 10)], id="append-t4"
        ),
        pytest.param(
            SLACK, "start_stream", THREAD, [Rate("start_stream", 20 / 60, 5)], id="start-tier2"
        ),
        pytest.param(
            SLACK, "stop_stream", THREAD, [Rate("stop_stream", 20 / 60, 5)], id="stop-own-budget"
        ),
        pytest.param(SLACK, "set_status", THREAD, [Rate("set_status", 50 / 60, 4)], id="status"),
        pytest.param(SLACK, "delete", THREAD, [Rate("delete", 50 / 60, 10)], id="delete-tier3"),
        pytest.param(SLACK, "react", THREAD, [Rate("react", 50 / 60, 10)], id="react-tier3"),
        pytest.param(
            SLACK, "answer_press", None, [Rate("answer_press", 100 / 60, 10)], id="ephemeral-t4"
        ),
        pytest.param(SLACK, "send", None, [], id="a-post-without-a-chat"),
        pytest.param(SLACK, "direct_chat", None, [], id="unlimited-method"),
        # A platform that paces every call per chat does so in its lanes: nothing here.
        pytest.param(TELEGRAM_LIKE, "send", CHANNEL, [], id="per-chat-platform-send"),
        pytest.param(TELEGRAM_LIKE, "edit", CHANNEL, [], id="no-edit-budget"),
        pytest.param(
            PlatformLimits(edit_rate=2.0, edit_burst=0),
            "edit",
            CHANNEL,
            [Rate("edit", 2.0, 1)],
            id="burst-at-least-one",
        ),
        pytest.param(
            PlatformLimits(chat_rate=0.0, chat_methods=frozenset({"send"})),
            "send",
            CHANNEL,
            [],
            id="no-chat-rate",
        ),
        pytest.param(
            PlatformLimits(
                chat_rate=1.0, group_chat_rate=0.25, chat_methods=frozenset({"send"}), chat_burst=3
            ),
            "send",
            ChatRef("-100", is_group=True),
            [Rate("send:-100", 0.25, 3)],
            id="group-rate",
        ),
    ],
)
def test_the_budgets_a_call_takes_from(
    limits: PlatformLimits, method: str, chat: ChatRef | None, expected: list[Rate]
) -> None:
    assert rates_for(limits, method, chat) == expected


@pytest.mark.parametrize(
    ("method", "chat", "expected"),
    [
        pytest.param("edit", THREAD, ["edit"], id="update-over-the-workspace"),
        pytest.param("send", THREAD, ["send:C1"], id="posts-in-the-channel"),
        pytest.param("direct_chat", None, ["direct_chat"], id="by-name-without-budget"),
    ],
)
def test_what_a_429_holds(method: str, chat: ChatRef | None, expected: list[str]) -> None:
    assert hold_keys(SLACK, method, chat) == expected


# (now, rate, burst) of each take in turn → the wait each is told.
TAKES = [
    pytest.param([(0.0, 1.0, 2)] * 3, [0.0, 0.0, 1.0], id="burst-then-credit"),
    pytest.param([(0.0, 1.0, 2)] * 4, [0.0, 0.0, 1.0, 2.0], id="credit-queues-in-order"),
    pytest.param([(0.0, 2.0, 1), (0.5, 2.0, 1)], [0.0, 0.0], id="refilled-in-time"),
    pytest.param([(0.0, 2.0, 1), (0.25, 2.0, 1)], [0.0, 0.25], id="half-refilled"),
    pytest.param([(0.0, 1.0, 2), (100.0, 1.0, 2)] + [(100.0, 1.0, 2)] * 2, [0, 0, 0, 1], id="cap"),
    pytest.param([(0.0, 0.0, 1)] * 5, [0.0] * 5, id="rate-zero-no-limit"),
]


@pytest.mark.parametrize(("takes", "waits"), TAKES)
def test_a_token_bucket_serves_on_credit(
    takes: list[tuple[float, float, int]], waits: list[float]
) -> None:
    bucket = TokenBucket()
    assert [bucket.take(now, rate, burst) for now, rate, burst in takes] == pytest.approx(waits)


def test_spare_takes_only_a_free_token() -> None:
    bucket = TokenBucket()
    assert [bucket.spare(0.0, 1.0, 2) for _ in range(3)] == [True, True, False]
    assert bucket.wait(0.5, 1.0, 2) == pytest.approx(0.5)
    assert bucket.spare(1.0, 1.0, 2)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.mark.anyio
async def test_the_pacer_waits_per_method_and_a_hold_stops_only_its_method() -> None:
    time = FakeTime()
    pacer = Pacer(LocalRates(time.clock, time.sleep), time.sleep)
    for _ in range(2):  # the channel's burst
        await pacer.take(SLACK, "send", THREAD)
    assert time.slept == []
    await pacer.take(SLACK, "send", OTHER_THREAD)  # the same channel's pace
    assert time.slept == [pytest.approx(1.0)]
    await pacer.take(SLACK, "send", ChatRef("C2", "1"))  # another channel's own
    await pacer.take(SLACK, "append_stream", THREAD)  # another method's own
    assert len(time.slept) == 1
    assert last_method() == "append_stream"

    await pacer.hold(SLACK, "append_stream", THREAD, 5.0)
    assert not await pacer.spare(SLACK, "append_stream", OTHER_THREAD)
    assert await pacer.spare(SLACK, "start_stream", THREAD)
    start = time.now
    await pacer.take(SLACK, "append_stream", OTHER_THREAD)
    assert time.now - start == pytest.approx(5.0)


@pytest.mark.anyio
async def test_a_prepaid_token_serves_the_next_call_of_its_method_once() -> None:
    time = FakeTime()
    slow = PlatformLimits(append_rate=1.0, append_burst=1)
    pacer = Pacer(LocalRates(time.clock, time.sleep), time.sleep)
    await pacer.prepay(slow, "append_stream")
    await pacer.take(slow, "append_stream")  # paid already
    assert time.now == 0.0
    await pacer.take(slow, "append_stream")
    assert time.now == pytest.approx(1.0)
    pacer.unpaid()
    assert math.isclose(time.now, 1.0)


def test_the_pacing_core_is_pure() -> None:
    assert pure_cores("bridge.rates") == ["bridge.rates"]
    assert forbidden_loads("bridge.rates") == []

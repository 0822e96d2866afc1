"""Shared platform rate budgets on a real redis-server (bridge/scale/budget.py).

The buckets refill on Redis's clock, so the tests that measure a wait use rates
slow enough (or bounds loose enough) that the milliseconds between calls cannot
change the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
import redis.asyncio as aioredis

from bridge.model import ChatRef, PlatformLimits
from bridge.rates import Rate
from bridge.scale.budget import Bucket, Budgets, SharedRates

if TYPE_CHECKING:
    from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio

SLOW = 0.001  # tokens per second: nothing refills during a test


async def test_a_full_bucket_gives_its_burst_then_asks_to_wait_for_a_token(
    client: aioredis.Redis, prefix: str
) -> None:
    budgets = Budgets(client, prefix, "telegram")
    bucket = [Bucket(f"{prefix}b", 5.0, 5)]

    assert [await budgets.wait_ms(bucket) for _ in range(5)] == [0, 0, 0, 0, 0]
    wait = await budgets.wait_ms(bucket)

    assert 0 < wait <= 200  # one token at 5/s: 200 ms, less what refilled meanwhile


async def test_take_waits_until_the_bucket_gives_a_token(
    client: aioredis.Redis, prefix: str
) -> None:
    budgets = Budgets(client, prefix, "telegram")
    bucket = [Bucket(f"{prefix}b", 20.0, 1)]

    assert await budgets.take(bucket) == 0
    assert await budgets.take(bucket) >= 1  # ~50 ms later
    assert await budgets.wait_ms(bucket) > 0  # and that token was taken


async def test_two_frontends_share_one_bucket(redis_server: RedisServer, prefix: str) -> None:
    other = aioredis.from_url(redis_server.url, decode_responses=True)
    one = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        first, second = Budgets(one, prefix, "slack"), Budgets(other, prefix, "slack")
        limits = PlatformLimits(chat_rate=SLOW, global_rate=1000.0)
        chat = ChatRef("C1")
        # Each frontend names the chat's bucket the same way: one budget for both.
        assert first.buckets(limits, "send", chat) == second.buckets(limits, "send", chat)
        bucket = [Bucket(f"{prefix}shared", SLOW, 4)]

        taken = [await b.wait_ms(bucket) for b in (first, second, first, second)]
        assert taken == [0, 0, 0, 0]
        assert await first.wait_ms(bucket) > 0
        assert await second.wait_ms(bucket) > 0
    finally:
        await one.aclose()
        await other.aclose()


async def test_a_call_takes_from_every_bucket_or_from_none(
    client: aioredis.Redis, prefix: str
) -> None:
    budgets = Budgets(client, prefix, "telegram")
    chat = Bucket(f"{prefix}chat", SLOW, 1)
    platform = Bucket(f"{prefix}all", SLOW, 3)

    assert await budgets.wait_ms([platform, chat]) == 0  # one from each
    for _ in range(3):  # the chat is empty: refused, and the platform's bucket untouched
        assert await budgets.wait_ms([platform, chat]) > 0

    assert [await budgets.wait_ms([platform]) > 0 for _ in range(3)] == [False, False, True]


async def test_the_wait_is_the_longest_of_the_empty_buckets(
    client: aioredis.Redis, prefix: str
) -> None:
    budgets = Budgets(client, prefix, "telegram")
    fast, slow = Bucket(f"{prefix}fast", 10.0, 1), Bucket(f"{prefix}slow", 2.0, 1)
    assert await budgets.wait_ms([fast, slow]) == 0

    wait = await budgets.wait_ms([fast, slow])

    assert 400 < wait <= 500  # the slow bucket's 500 ms, not the fast one's 100


async def test_no_buckets_never_wait(client: aioredis.Redis, prefix: str) -> None:
    assert await Budgets(client, prefix, "telegram").wait_ms([]) == 0


LIMITS = PlatformLimits(chat_rate=1.0, global_rate=30.0, group_chat_rate=0.5)
PRIVATE = ChatRef("42")
GROUP = ChatRef("-100", is_group=True)


@pytest.mark.parametrize(
    ("limits", "method", "chat", "expected"),
    [
        pytest.param(LIMITS, "send", PRIVATE, [("all", 30.0, 30), ("chat:42", 1.0, 1)], id="send"),
        pytest.param(LIMITS, "edit", PRIVATE, [("all", 30.0, 30), ("chat:42", 1.0, 1)], id="edit"),
        pytest.param(
            LIMITS, "upload", PRIVATE, [("all", 30.0, 30), ("chat:42", 1.0, 1)], id="upload"
        ),
        pytest.param(
            LIMITS, "send", GROUP, [("all", 30.0, 30), ("chat:-100", 0.5, 1)], id="group-chat-rate"
        ),
        pytest.param(LIMITS, "answer_press", None, [("all", 30.0, 30)], id="answer-press"),
        pytest.param(LIMITS, "answer_press", PRIVATE, [("all", 30.0, 30)], id="answer-press-chat"),
        pytest.param(LIMITS, "react", PRIVATE, [("all", 30.0, 30)], id="react-only-global"),
        pytest.param(LIMITS, "set_status", PRIVATE, [("all", 30.0, 30)], id="set-status"),
        pytest.param(LIMITS, "direct_chat", None, [("all", 30.0, 30)], id="direct-chat"),
        pytest.param(LIMITS, "send", None, [("all", 30.0, 30)], id="no-chat-only-global"),
        pytest.param(
            PlatformLimits(chat_rate=1.0, global_rate=0.0),
            "send",
            PRIVATE,
            [("chat:42", 1.0, 1)],
            id="no-global-limit",
        ),
        pytest.param(
            PlatformLimits(chat_rate=0.0, global_rate=0.0), "send", PRIVATE, [], id="no-limits"
        ),
        pytest.param(
            PlatformLimits(chat_rate=2.5, global_rate=0.0),
            "edit",
            PRIVATE,
            [("chat:42", 2.5, 3)],
            id="burst-rounds-up",
        ),
    ],
)
async def test_which_buckets_a_call_takes_from(
    client: aioredis.Redis,
    prefix: str,
    limits: PlatformLimits,
    method: str,
    chat: ChatRef | None,
    expected: list[tuple[str, float, int]],
) -> None:
    buckets = Budgets(client, prefix, "slack").buckets(limits, method, chat)

    assert [(b.key, b.rate, b.burst) for b in buckets] == [
        (f"{prefix}rate:slack:{name}", rate, burst) for name, rate, burst in expected
    ]


async def test_a_platform_paced_by_method_is_not_paced_per_chat_again(
    client: aioredis.Redis, prefix: str
) -> None:
    """Slack's outboxes took each method's budgets (SharedRates): a frontend takes only
    the platform's calls over all chats."""
    limits = PlatformLimits(chat_rate=1.0, global_rate=20.0, chat_methods=frozenset({"send"}))
    buckets = Budgets(client, prefix, "slack").buckets(limits, "send", ChatRef("C1", "1.2"))
    assert [b.key for b in buckets] == [f"{prefix}rate:slack:all"]


async def test_two_processes_share_each_method_budget_and_its_holds(
    redis_server: RedisServer, prefix: str
) -> None:
    one = aioredis.from_url(redis_server.url, decode_responses=True)
    other = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        first, second = SharedRates(one, prefix, "slack"), SharedRates(other, prefix, "slack")
        edits = [Rate("edit", SLOW, 2)]
        assert [await first.spare(edits), await second.spare(edits)] == [True, True]
        assert not await first.spare(edits)  # the burst of both together is spent
        assert not await second.spare(edits)
        assert await second.spare([Rate("append_stream", SLOW, 1)])  # another method's own

        await first.hold(["append_stream"], 5.0)
        assert 4.0 < await second.held(["append_stream"]) <= 5.0
        assert await second.held(["edit"]) <= 0
    finally:
        await one.aclose()
        await other.aclose()


async def test_a_spare_call_lets_a_waiting_taker_have_the_next_token(
    client: aioredis.Redis, prefix: str
) -> None:
    """What may wait (a run's status giving way, a stream start) finds no token to spare
    while a call that must go waits for it, as in a process's own buckets where the
    waiting taker holds the token on credit (bridge/rates.py)."""
    budgets = Budgets(client, prefix, "slack")
    waited, free = [Bucket(f"{prefix}waited", 20.0, 1)], [Bucket(f"{prefix}free", 20.0, 1)]
    for bucket in (waited, free):
        assert await budgets.wait_ms(bucket) == 0  # the burst is spent
    wait = await budgets.wait_ms(waited)  # a taker must wait: it marks the bucket
    assert wait > 0

    await anyio.sleep(0.1)  # both refilled (20 a second); the taker is not back yet
    assert await budgets.wait_ms(waited, spare=True) > 0
    assert await budgets.wait_ms(free, spare=True) == 0  # nobody waits there
    assert await budgets.wait_ms(waited) == 0  # the taker, back, has its token

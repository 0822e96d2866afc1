"""Leases with fencing tokens on a real redis-server (bridge/scale/lease.py).

Each scenario is a list of steps by named holders (`<worker name>/<instance>`); a
holder acts with the lease as it last got it, so a holder whose lease was taken
over acts with a stale token. Every test has its own key prefix.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from bridge.scale.lease import Held, Leases

if TYPE_CHECKING:
    import redis.asyncio as aioredis

pytestmark = pytest.mark.anyio

KEY = "tg:123"
STREAM_GROUP = "owner"
LONG = 30.0  # s: a ttl no test outlives


@pytest.fixture
def leases(client: aioredis.Redis) -> Leases:
    return Leases(client, f"t{uuid.uuid4().hex}:")


# --- steps ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    holder: str
    token: int | None  # the token it gets; None: refused
    mine: str = ""  # mine_prefix
    previous: str | None = None  # who held it before, when the test says


@dataclass(frozen=True)
class Renew:
    holder: str
    ok: bool


@dataclass(frozen=True)
class Release:
    holder: str
    ok: bool


@dataclass(frozen=True)
class Ack:
    """`holder` acknowledges an inbound it read: done (gone from the stream) or not
    (still pending, still in the stream)."""

    holder: str
    ok: bool


Step = Claim | Renew | Release | Ack


async def run(leases: Leases, client: aioredis.Redis, steps: list[Step]) -> None:
    held: dict[str, Held] = {}
    stream = f"{leases.lease_key(KEY)}:in"
    await client.xgroup_create(stream, STREAM_GROUP, id="0", mkstream=True)
    for n, step in enumerate(steps):
        where = f"step {n}: {step}"
        match step:
            case Claim(holder, token, mine, previous):
                got = await leases.claim(KEY, holder, LONG, mine_prefix=mine)
                assert (got.token if got else None) == token, where
                if got is not None:
                    assert (got.name, got.holder) == (KEY, holder), where
                    assert await leases.current_token(KEY) == got.token, where
                    held[holder] = got
                    if previous is not None:
                        assert got.previous == previous, where
            case Renew(holder, ok):
                assert await leases.renew(held[holder], LONG) is ok, where
            case Release(holder, ok):
                assert await leases.release(held[holder]) is ok, where
            case Ack(holder, ok):
                entry = str(await client.xadd(stream, {"e": where}))
                read: Any = await client.xreadgroup(STREAM_GROUP, holder, {stream: ">"}, count=1)
                assert read[0][1][0][0] == entry, where
                before = await client.xlen(stream)
                assert await leases.ack(held[holder], stream, STREAM_GROUP, entry) is ok, where
                pending = await client.xpending_range(stream, STREAM_GROUP, "-", "+", 100)
                still_pending = entry in [p["message_id"] for p in pending]
                assert still_pending is not ok, where
                assert await client.xlen(stream) == (before - 1 if ok else before), where


SCENARIOS = [
    pytest.param([Claim("w1/a", 1, previous="")], id="free-lease-claimed-with-token-1"),
    pytest.param([Claim("w1/a", 1), Claim("w2/a", None)], id="another-holder-refused"),
    pytest.param(
        [Claim("w1/a", 1), Claim("w2/b", None, mine="w2/")], id="another-names-prefix-refused"
    ),
    pytest.param(
        [Claim("w10/a", 1), Claim("w1/b", None, mine="w1/")], id="prefix-ends-at-the-slash"
    ),
    pytest.param(
        [Claim("w1/a", 1), Claim("w1/b", 2, mine="w1/", previous="w1/a")],
        id="same-name-restart-takes-over-with-higher-token",
    ),
    pytest.param(
        [Claim("w1/a", 1), Claim("w1/b", None)], id="same-name-without-mine-prefix-refused"
    ),
    pytest.param([Claim("w1/a", 1), Claim("w1/a", 2, previous="w1/a")], id="holder-claims-again"),
    pytest.param([Claim("w1/a", 1), Renew("w1/a", True)], id="holder-renews"),
    pytest.param(
        [Claim("w1/a", 1), Claim("w1/b", 2, mine="w1/"), Renew("w1/a", False), Renew("w1/b", True)],
        id="stale-holder-cannot-renew-after-takeover",
    ),
    pytest.param(
        [Claim("w1/a", 1), Claim("w1/a", 2), Renew("w1/a", True)],
        id="holder-renews-with-its-latest-token",
    ),
    pytest.param([Claim("w1/a", 1), Ack("w1/a", True)], id="holder-acks-and-removes"),
    pytest.param(
        [Claim("w1/a", 1), Claim("w1/b", 2, mine="w1/"), Ack("w1/a", False), Ack("w1/b", True)],
        id="stale-holder-ack-leaves-entry-pending",
    ),
    pytest.param(
        [Claim("w1/a", 1), Release("w1/a", True), Ack("w1/a", False)],
        id="released-holder-cannot-ack",
    ),
    pytest.param(
        [Claim("w1/a", 1), Claim("w1/b", 2, mine="w1/"), Release("w1/a", False)],
        id="stale-holder-cannot-release",
    ),
    pytest.param(
        [Claim("w1/a", 1), Release("w1/a", True), Claim("w2/a", 2, previous="")],
        id="released-lease-claimed-by-another-with-higher-token",
    ),
    pytest.param(
        [Claim("w1/a", 1), Release("w1/a", True), Renew("w1/a", False)],
        id="released-lease-cannot-be-renewed",
    ),
]


@pytest.mark.parametrize("steps", SCENARIOS)
async def test_lease_scenario(leases: Leases, client: aioredis.Redis, steps: list[Step]) -> None:
    await run(leases, client, steps)


async def test_a_lease_lapses_after_its_ttl_and_is_listed_as_lapsed(
    leases: Leases, client: aioredis.Redis
) -> None:
    # Long enough to see it not lapsed yet on a loaded machine.
    held = await leases.claim(KEY, "w1/a", 1.0)
    assert held is not None
    assert await leases.lapsed(10) == []
    assert await leases.claim(KEY, "w2/a", LONG) is None

    await anyio.sleep(1.3)

    assert await leases.lapsed(10) == [(KEY, True)]  # its holder died holding it
    assert not await client.exists(leases.lease_key(KEY))
    assert await leases.renew(held, LONG) is False
    taken = await leases.claim(KEY, "w2/a", LONG)
    assert taken == Held(KEY, "w2/a", 2, "")
    assert await leases.lapsed(10) == []  # claimed again: scored by its new ttl


async def test_a_renewed_lease_does_not_lapse(leases: Leases) -> None:
    held = await leases.claim(KEY, "w1/a", 0.5)
    assert held is not None
    for _ in range(4):  # 0.6 s in all: past the first ttl
        await anyio.sleep(0.15)
        assert await leases.renew(held, 0.5)

    assert await leases.lapsed(10) == []
    assert await leases.claim(KEY, "w2/a", LONG) is None


async def test_lapsed_lists_oldest_first_up_to_the_limit(leases: Leases) -> None:
    for n, ttl in enumerate([0.15, 0.05, 0.1]):
        assert await leases.claim(f"tg:{n}", "w1/a", ttl) is not None
    assert await leases.claim("tg:live", "w1/a", LONG) is not None

    await anyio.sleep(0.3)

    assert await leases.lapsed(10) == [("tg:1", True), ("tg:2", True), ("tg:0", True)]
    assert await leases.lapsed(2) == [("tg:1", True), ("tg:2", True)]


async def test_forget_keeps_a_claimed_lease_in_the_index(
    leases: Leases, client: aioredis.Redis
) -> None:
    held = await leases.claim(KEY, "w1/a", LONG)
    assert held is not None

    await leases.forget(KEY)
    assert await client.zscore(leases.index, KEY) is not None

    assert await leases.release(held)
    await leases.forget(KEY)
    assert await client.zscore(leases.index, KEY) is None
    assert await leases.lapsed(10) == []


async def test_release_leaves_it_lapsed_in_the_index_with_score_0(
    leases: Leases, client: aioredis.Redis
) -> None:
    held = await leases.claim(KEY, "w1/a", LONG)
    assert held is not None
    assert await client.zscore(leases.index, KEY) is not None
    assert await leases.lapsed(10) == []

    assert await leases.release(held)

    assert await client.zscore(leases.index, KEY) == 0
    assert await leases.lapsed(10) == [(KEY, False)]  # let go of, not died holding it
    assert not await client.exists(leases.lease_key(KEY))
    assert await leases.current_token(KEY) == 1  # the token never goes back


async def test_an_unindexed_lease_stays_out_of_the_index(
    leases: Leases, client: aioredis.Redis
) -> None:
    held = await leases.claim("poll:telegram", "f1", LONG, indexed=False)
    assert held is not None
    assert await leases.renew(held, LONG, indexed=False)
    assert await leases.release(held, indexed=False)

    assert await client.zcard(leases.index) == 0


async def test_renew_all_says_which_leases_are_still_ours(leases: Leases) -> None:
    mine = await leases.claim("tg:1", "w1/a", LONG)
    lost = await leases.claim("tg:2", "w1/a", LONG)
    assert mine is not None
    assert lost is not None
    assert await leases.claim("tg:2", "w1/b", LONG, mine_prefix="w1/") is not None

    assert await leases.renew_all([mine, lost], LONG) == [True, False]
    assert await leases.renew_all([], LONG) == []

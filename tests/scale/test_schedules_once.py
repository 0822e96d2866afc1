"""Scheduled runs fire once with several workers sharing a real redis-server.

Two workers' bridges (as `--role worker` makes them: conversations leased, scheduled
runs forwarded onto their conversation's stream) tick at the same moment of a
turned clock, again and again: each occurrence lands on the stream once, as one
inbound from the schedule's maker marked "⏰ scheduled", for whichever worker owns
the conversation. The claim is the store's (`seen`, Redis `SET NX`), keyed by the
schedule and the occurrence's time.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import anyio
import pytest

from bridge.model import ChatRef
from bridge.options import AgentOptions, BridgeOptions
from bridge.scale.frontend import Forwarder
from bridge.scale.names import inbound_stream, scale_prefix
from bridge.scale.stats import ScaleStats
from bridge.scale.wire import unwrap
from bridge.service import Bridge
from bridge.store.redis import RedisStore
from bridge.store.schedule_record import ScheduleRecord
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import redis.asyncio as aioredis

    from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio

KEY = "tg:42"
BERLIN = ZoneInfo("Europe/Berlin")
MADE = datetime(2026, 11, 27, 10, 0, tzinfo=BERLIN).timestamp()
NINE = datetime(2026, 11, 30, 9, 0, tzinfo=BERLIN).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def schedule(schedule_id: str, **changes: object) -> ScheduleRecord:
    fields: dict[str, object] = {
        "id": schedule_id,
        "key": KEY,
        "chat_id": "42",
        "owner": "42",
        "owner_name": "alice",
        "words": "weekdays 09:00",
        "cron": "0 9 * * mon-fri",
        "zone": "Europe/Berlin",
        "prompt": "check CI",
        "state": "active",
        "created_at": MADE,
        "done_until": MADE,
    }
    return ScheduleRecord.model_validate({**fields, **changes})


@contextlib.asynccontextmanager
async def worker_bridge(
    server: RedisServer, client: aioredis.Redis, prefix: str, tmp_path: Path, clock: Clock
) -> AsyncIterator[Bridge]:
    store = await RedisStore.open(server.url, prefix=prefix)
    options = BridgeOptions(
        data_dir=tmp_path, agent=AgentOptions(argv=("false",), env={}), allowed_users=None
    )
    forward = Forwarder(client, scale_prefix(prefix), options, ScaleStats(), store)
    try:
        async with Bridge(
            RecordingAdapter(), store, options, wall=clock, shared=True, scheduled_to=forward
        ) as bridge:
            yield bridge
    finally:
        await store.aclose()


async def test_two_workers_ticking_together_put_each_occurrence_on_the_stream_once(
    redis_server: RedisServer, client: aioredis.Redis, prefix: str, tmp_path: Path
) -> None:
    clock = Clock(MADE)
    async with contextlib.AsyncExitStack() as stack:
        bridges = [
            await stack.enter_async_context(
                worker_bridge(redis_server, client, prefix, tmp_path / name, clock)
            )
            for name in ("w1", "w2")
        ]
        await bridges[0].store.put_schedule(schedule("s1"))
        sunday = NINE - 12 * 3600
        await bridges[0].store.put_schedule(
            schedule("s2", cron="0 9 * * *", created_at=sunday, done_until=sunday)
        )
        for now in (NINE + 1, NINE + 2, NINE + 24 * 3600 + 1):
            clock.now = now
            for _ in range(3):
                async with anyio.create_task_group() as tg:
                    for bridge in bridges:
                        assert bridge.ticker is not None
                        tg.start_soon(bridge.ticker.tick)
    stream = inbound_stream(scale_prefix(prefix), KEY)
    entries: Any = await client.xrange(stream)
    inbounds = [unwrap(fields["e"])[0] for _, fields in entries]
    assert sorted(i.event_id for i in inbounds) == sorted(
        f"schedule:{s}:run:{t}" for s in ("s1", "s2") for t in (NINE, NINE + 24 * 3600)
    )
    assert {i.sender.id for i in inbounds} == {"42"}
    assert {i.chat for i in inbounds} == {ChatRef("42")}
    assert {i.text for i in inbounds} == {"check CI"}
    assert all(i.scheduled.startswith("⏰ scheduled: ") for i in inbounds)
    fired = [b.ticker.stats.fired for b in bridges if b.ticker is not None]
    assert sum(fired) == 4

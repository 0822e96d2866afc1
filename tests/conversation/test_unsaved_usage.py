"""Usage recorded while Redis is down is kept and written once it is back (a real
redis-server stopped and started again, the real Redis store)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.conversation.unsaved_usage import UnsavedUsage
from bridge.store.redis import RedisStore
from tests.store.test_usage import entry
from tests.support.loopback import until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.spend.usage import UsageEntry

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
]


async def test_usage_recorded_while_redis_is_down_is_written_when_it_is_back(
    tmp_path: Path,
) -> None:
    measured: list[UsageEntry] = []
    with RedisServer(tmp_path / "redis", persist=True) as redis:
        store = await RedisStore.open(redis.url)
        try:
            async with anyio.create_task_group() as tg:
                usage = UnsavedUsage("tg:1", store.add_usage, measured.append, tg.start_soon)
                await usage.add(entry("m1"))
                assert usage.waiting == 0

                await anyio.to_thread.run_sync(redis.stop)
                await usage.add(entry("m2"))
                await usage.add(entry("m3"))
                assert usage.waiting == 2  # kept, in order, not measured yet
                assert [e.message for e in measured] == ["m1"]

                await anyio.to_thread.run_sync(redis.start_again)
                await until(lambda: usage.waiting == 0, 30)
                await usage.add(entry("m2"))  # a replay of one kept: recorded once
            totals = await store.usage_totals("conversation", "tg:1", 0)
        finally:
            await store.aclose()
    assert [e.message for e in measured] == ["m1", "m2", "m3"]
    assert (totals.messages, totals.cost) == (3, 0.75)

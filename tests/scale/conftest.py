"""A real redis-server for the scale-out's tests: one per test module, a client per
test, and a key prefix per test so that no two tests share state."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
import redis.asyncio as aioredis

from tests.support.redis_server import INSTALL_HINT, RedisServer, redis_server_bin

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if redis_server_bin() is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex}:"

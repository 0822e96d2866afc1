"""Small helpers the frontends' and workers' Redis loops share: consumer groups, retries."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from redis.exceptions import ResponseError

from bridge.backoff import Backoff

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import redis.asyncio as aioredis

log = logging.getLogger(__name__)


# Redis calls retried: 0.1 s doubling, at most 1 s, from the start again after a success.
# At most 1 s: the loops that wait so (the calls and their answers) carry every chat's
# output, and a Redis back after a restart must be found within a second, not after a
# wait grown while it was down (5 s before: up to 10 s more across a frontend and a
# worker).
REDIS_BACKOFF = Backoff(first=0.1, cap=1.0)


async def ensure_group(client: aioredis.Redis, stream: str, group: str, start: str = "0") -> None:
    """The consumer group, made if missing (with the stream). From "0" by default:
    entries added before the group existed count."""
    try:
        await client.xgroup_create(stream, group, id=start, mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


async def take_pending(client: aioredis.Redis, stream: str, group: str, consumer: str) -> int:
    """Every entry of the group read and not acknowledged is `consumer`'s now (a
    conversation taken over: what its earlier owner never finished); how many."""
    moved, start = 0, "0-0"
    while True:
        reply: Any = await client.xautoclaim(stream, group, consumer, 0, start_id=start, count=100)
        start, entries = str(reply[0]), reply[1]
        moved += len(entries)
        if start == "0-0" or not entries:
            return moved


async def forever(loop: Callable[[], Awaitable[None]]) -> None:
    """A loop that must not end: a bug in one round is logged, and it starts again."""
    while True:
        try:
            await loop()
        except Exception:
            log.exception("loop %s failed; starting it again", loop.__name__)
            await anyio.sleep(1.0)

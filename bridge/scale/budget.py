"""Platform rate budgets shared in Redis, so N frontends together keep one platform's limits.

Each budget is a token bucket in a Redis hash (tokens, last refill in ms); one Lua
script refills and takes from all the buckets a call needs (the chat's and the
platform's), all or none, on Redis's own clock, and says how long to wait when one
is empty. A worker's outbox already paces its own chats (bridge/outbox/); the
shared budget is what holds when two workers' conversations share a Slack channel,
or when many workers' calls meet in one frontend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from bridge.platform import MEMBER

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from bridge.model import ChatRef, PlatformLimits

# KEYS: buckets. ARGV: pairs of (rate per s, burst) per bucket.
# → 0 when a token was taken from every bucket, else ms to wait (nothing taken).
_TAKE = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local levels = {}
local wait = 0
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', key, 't', 'ms')
  local tokens = tonumber(state[1]) or burst
  local last = tonumber(state[2]) or ms
  tokens = math.min(burst, tokens + (ms - last) * rate / 1000)
  levels[i] = tokens
  if tokens < 1 then wait = math.max(wait, math.ceil((1 - tokens) * 1000 / rate)) end
end
if wait > 0 then return wait end
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  redis.call('HSET', key, 't', levels[i] - 1, 'ms', ms)
  redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
end
return 0
"""


@dataclass(frozen=True)
class Bucket:
    key: str
    rate: float  # tokens per second
    burst: int

    @classmethod
    def at(cls, key: str, rate: float) -> Bucket:
        return cls(key, rate, max(1, math.ceil(rate)))


class Budgets:
    """The shared budgets of one platform."""

    def __init__(self, client: aioredis.Redis, prefix: str, platform: str) -> None:
        self._prefix = f"{prefix}rate:{platform}:"
        self._take = client.register_script(_TAKE)

    def buckets(self, limits: PlatformLimits, method: str, chat: ChatRef | None) -> list[Bucket]:
        """The buckets a call takes from: the platform's always, its chat's for a message."""
        out = [Bucket.at(f"{self._prefix}all", limits.global_rate)]
        # A call that is no chat message (`Member.in_chat`) counts only against the bot.
        if chat is not None and MEMBER[method].in_chat:
            rate = limits.chat_rate_in(chat)
            out.append(Bucket.at(f"{self._prefix}chat:{limits.lane_of(chat)}", rate))
        return [b for b in out if b.rate > 0]

    async def wait_ms(self, buckets: list[Bucket]) -> int:
        """Take one token from each bucket, or say how long until that could work."""
        if not buckets:
            return 0
        args: list[str] = []
        for bucket in buckets:
            args += [repr(bucket.rate), str(bucket.burst)]
        return int(await self._take(keys=[b.key for b in buckets], args=args))

    async def take(self, buckets: list[Bucket]) -> int:
        """Wait until every bucket gives a token; how many times it had to wait."""
        waits = 0
        while (ms := await self.wait_ms(buckets)) > 0:
            waits += 1
            await anyio.sleep(ms / 1000)
        return waits

"""Platform rate budgets shared in Redis, so a scale-out's processes together keep one
platform's limits.

Each budget is a token bucket in a Redis hash (tokens, last refill in ms); one Lua
script refills and takes from all the buckets a call needs, all or none, on Redis's
own clock, and says how long to wait when one is empty.

- `Budgets` is what a frontend takes before each call it makes for a worker: the
  platform's calls over all chats, and the chat's where the platform paces every call
  per chat (Telegram, Discord: a chat's conversations may be two workers').
- `SharedRates` keeps the per-method budgets of every process's outbox
  (`bridge.outbox.pacer.RateStore`, bridge/rates.py): what the docs call
  workspace- or bot-wide (Slack's edits, stream starts, stops and appends, a
  channel's posts) is one budget for all workers and frontends, and a 429's hold on
  a method holds it for them all. Should Redis fail, each process paces on its own
  for that call (`LocalRates`): late pacing beats a lost message.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from redis.exceptions import RedisError

from bridge.outbox.pacer import LocalRates
from bridge.platform import MEMBER

if TYPE_CHECKING:
    from collections.abc import Sequence

    import redis.asyncio as aioredis

    from bridge.model import ChatRef, PlatformLimits
    from bridge.rates import Rate
    from bridge.scale.stats import ScaleStats

log = logging.getLogger(__name__)

# KEYS: the buckets, then as many markers "somebody waits for this bucket".
# ARGV: "take" or "spare", then pairs of (rate per s, burst) per bucket.
# → 0 when a token was taken from every bucket, else ms to wait (nothing taken).
# A taker that must wait marks the buckets it waits for until it comes back, and a
# spare call finds nothing while a mark is there: as in the process's own buckets
# (bridge/rates.py, takers on credit), what may wait lets a waiting call go first.
_TAKE = """
local n = #KEYS / 2
local spare = ARGV[1] == 'spare'
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local levels = {}
local wait = 0
for i = 1, n do
  local key = KEYS[i]
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local state = redis.call('HMGET', key, 't', 'ms')
  local tokens = tonumber(state[1]) or burst
  local last = tonumber(state[2]) or ms
  tokens = math.min(burst, tokens + (ms - last) * rate / 1000)
  levels[i] = tokens
  if tokens < 1 then wait = math.max(wait, math.ceil((1 - tokens) * 1000 / rate)) end
  if spare then
    local wanted = redis.call('PTTL', KEYS[n + i])
    if wanted > 0 then wait = math.max(wait, wanted) end
  end
end
if wait > 0 then
  if not spare then
    for i = 1, n do
      if levels[i] < 1 then redis.call('SET', KEYS[n + i], '1', 'PX', wait + 250) end
    end
  end
  return wait
end
for i = 1, n do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  redis.call('HSET', KEYS[i], 't', levels[i] - 1, 'ms', ms)
  redis.call('PEXPIRE', KEYS[i], math.ceil(burst * 1000 / rate) + 1000)
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
        # A call that is no chat message (`Member.in_chat`) counts only against the bot;
        # where the platform paces by method, the outboxes took its budgets already.
        if chat is not None and MEMBER[method].in_chat and not limits.chat_methods:
            rate = limits.chat_rate_in(chat)
            out.append(Bucket.at(f"{self._prefix}chat:{limits.lane_of(chat)}", rate))
        return [b for b in out if b.rate > 0]

    async def wait_ms(self, buckets: list[Bucket], *, spare: bool = False) -> int:
        """Take one token from each bucket, or say how long until that could work;
        `spare`: only if no waiting taker marked one of them (see `_TAKE`)."""
        if not buckets:
            return 0
        args: list[str] = ["spare" if spare else "take"]
        for bucket in buckets:
            args += [repr(bucket.rate), str(bucket.burst)]
        keys = [b.key for b in buckets]
        return int(await self._take(keys=keys + [f"{k}:wanted" for k in keys], args=args))

    async def take(self, buckets: list[Bucket]) -> int:
        """Wait until every bucket gives a token; how many times it had to wait."""
        waits = 0
        while (ms := await self.wait_ms(buckets)) > 0:
            waits += 1
            await anyio.sleep(ms / 1000)
        return waits


class SharedRates:
    """`bridge.outbox.pacer.RateStore` in Redis: one platform's per-method budgets and
    holds, the same for every process that shares the store."""

    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        platform: str,
        stats: ScaleStats | None = None,
    ) -> None:
        self._redis = client
        self._budgets = Budgets(client, prefix, platform)
        self._prefix = f"{prefix}rate:{platform}:"
        self._stats = stats
        self._local = LocalRates(anyio.current_time, anyio.sleep)

    def _buckets(self, rates: Sequence[Rate]) -> list[Bucket]:
        return [Bucket(f"{self._prefix}m:{r.key}", r.rate, r.burst) for r in rates]

    async def take(self, rates: Sequence[Rate]) -> None:
        try:
            waits = await self._budgets.take(self._buckets(rates))
        except RedisError as exc:
            self._failed(exc)
            await self._local.take(rates)
            return
        if self._stats is not None:
            self._stats.budget_waits += waits

    async def spare(self, rates: Sequence[Rate]) -> bool:
        try:
            return await self._budgets.wait_ms(self._buckets(rates), spare=True) == 0
        except RedisError as exc:
            self._failed(exc)
            return await self._local.spare(rates)

    async def hold(self, keys: Sequence[str], seconds: float) -> None:
        ms = max(1, math.ceil(seconds * 1000))
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.set(f"{self._prefix}hold:{key}", "1", px=ms)
                await pipe.execute()
        except RedisError as exc:
            self._failed(exc)
            await self._local.hold(keys, seconds)

    async def held(self, keys: Sequence[str]) -> float:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.pttl(f"{self._prefix}hold:{key}")
                left = await pipe.execute()
        except RedisError as exc:
            self._failed(exc)
            return await self._local.held(keys)
        return max((int(ms) for ms in left), default=0) / 1000

    def _failed(self, exc: RedisError) -> None:
        if self._stats is not None:
            self._stats.redis_errors += 1
        log.warning("shared rate budgets unreachable (%s): pacing in this process", exc)

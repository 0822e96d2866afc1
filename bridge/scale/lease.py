"""Leases in Redis: who owns a conversation (or polls Telegram), with fencing tokens.

A lease is a key holding its holder's name (`<worker name>/<instance>`) with a
time to live; its fencing token is a counter that goes up at every claim, so a
holder whose lease lapsed and was claimed again holds a token that is no longer
the current one. Everything that acts for a conversation checks holder and token
in the same Lua script as the action (renew, acknowledge an inbound, release), so
a worker that lost its lease can no longer touch what it owned.

Conversation leases are also scored in one sorted set by when they lapse (Redis's
own clock), which is how a worker finds the conversations of a worker that died.

A restarted worker with the same name may take its own name's leases over at once
(`mine_prefix`): it is the same worker, come back for its agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis.asyncio as aioredis

# Redis's own clock in ms, so every worker scores leases on one clock.
_NOW_MS = """
local function now_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
"""

# KEYS: lease, fence, lapse index. ARGV: holder, ttl ms, own-name prefix ("" none),
# member in the index ("" none). → {token, previous holder or ""}; token 0: held by another.
_CLAIM = (
    _NOW_MS
    + """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then
  if ARGV[3] == '' or string.sub(current, 1, #ARGV[3]) ~= ARGV[3] then
    return {0, current}
  end
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[2]), ARGV[4])
end
return {token, current or ''}
"""
)

# KEYS: lease, fence, lapse index. ARGV: holder, token, ttl ms, member ("" none). → 1 | 0
_RENEW = (
    _NOW_MS
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[3]), ARGV[4])
end
return 1
"""
)

# KEYS: lease, fence, lapse index. ARGV: holder, token, member ("" none).
# Released, the member stays in the index as lapsed, so a sweep looks at it.
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[3], 0, ARGV[3]) end
return 1
"""

# KEYS: lease, lapse index. ARGV: member. Out of the index unless someone holds it.
_FORGET = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""

# KEYS: stream. An empty inbound stream (and its group) goes: a quiet conversation
# keeps only its fencing counter. One added to after this gets its group again.
_DROP_EMPTY = """
if redis.call('XLEN', KEYS[1]) ~= 0 then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""

# KEYS: lease, fence, stream. ARGV: holder, token, group, entry id.
# An inbound is done: acknowledged and removed, by the lease's holder only.
_ACK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
redis.call('XACK', KEYS[3], ARGV[3], ARGV[4])
redis.call('XDEL', KEYS[3], ARGV[4])
return 1
"""


@dataclass(frozen=True)
class Held:
    """A lease as its holder knows it."""

    name: str  # what is leased (a conversation key, "poll:telegram")
    holder: str
    token: int
    previous: str  # who held it before this claim ("" nobody: it was free or lapsed)


class Leases:
    """The lease scripts over one Redis client, under `prefix`."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._redis = client
        self._prefix = prefix
        self._index = f"{prefix}lapse"
        self._claim = client.register_script(_CLAIM)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._ack = client.register_script(_ACK)
        self._forget = client.register_script(_FORGET)
        self._drop_empty = client.register_script(_DROP_EMPTY)

    @property
    def index(self) -> str:
        return self._index

    def lease_key(self, name: str) -> str:
        return f"{self._prefix}lease:{name}"

    def fence_key(self, name: str) -> str:
        return f"{self._prefix}fence:{name}"

    async def claim(
        self, name: str, holder: str, ttl: float, *, mine_prefix: str = "", indexed: bool = True
    ) -> Held | None:
        """The lease, if it is free, lapsed, ours, or (`mine_prefix`) our name's."""
        keys = [self.lease_key(name), self.fence_key(name), self._index]
        args = [holder, _ms(ttl), mine_prefix, name if indexed else ""]
        token, previous = await self._claim(keys=keys, args=args)
        if int(token) == 0:
            return None
        return Held(name, holder, int(token), str(previous))

    async def renew(self, held: Held, ttl: float, *, indexed: bool = True) -> bool:
        return bool(
            await self._renew(keys=self._keys(held.name), args=self._args(held, ttl, indexed))
        )

    async def renew_all(self, held: list[Held], ttl: float) -> list[bool]:
        """Renew many in one round trip; for each, whether it is still ours."""
        if not held:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for one in held:
                await self._renew(
                    keys=self._keys(one.name), args=self._args(one, ttl, True), client=pipe
                )
            results: list[Any] = await pipe.execute()
        return [bool(r) for r in results]

    async def release(self, held: Held, *, indexed: bool = True) -> bool:
        args = [held.holder, str(held.token), held.name if indexed else ""]
        return bool(await self._release(keys=self._keys(held.name), args=args))

    async def ack(self, held: Held, stream: str, group: str, entry: str) -> bool:
        """Acknowledge (and remove) `entry` of `stream`, if `held` is still current."""
        keys = [self.lease_key(held.name), self.fence_key(held.name), stream]
        return bool(await self._ack(keys=keys, args=[held.holder, str(held.token), group, entry]))

    async def drop_if_empty(self, stream: str) -> bool:
        return bool(await self._drop_empty(keys=[stream]))

    async def current_token(self, name: str) -> int:
        value = await self._redis.get(self.fence_key(name))
        return int(value or 0)

    async def lapsed(self, limit: int) -> list[tuple[str, bool]]:
        """Up to `limit` names whose lease lapsed (by Redis's clock), oldest first, each
        with whether its holder died holding it (True), rather than letting it go
        (`release` scores it 0)."""
        seconds, micros = await self._redis.time()
        now = int(seconds) * 1000 + int(micros) // 1000
        found: Any = await self._redis.zrangebyscore(
            self._index, "-inf", now, start=0, num=limit, withscores=True
        )
        return [(str(name), float(score) > 0) for name, score in found]

    async def held_by(self, holder_prefix: str) -> list[str]:
        """The conversations whose lease a holder named so holds (a worker's name)."""
        names = [str(n) for n in await self._redis.zrange(self._index, 0, -1)]
        holders: list[Any] = []
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            holders += await self._redis.mget([self.lease_key(n) for n in chunk])
        return [n for n, h in zip(names, holders, strict=True) if h and h.startswith(holder_prefix)]

    async def forget(self, name: str) -> None:
        """Out of the lapse index (nothing left to take over), unless claimed since."""
        await self._forget(keys=[self.lease_key(name), self._index], args=[name])

    def _keys(self, name: str) -> list[str]:
        return [self.lease_key(name), self.fence_key(name), self._index]

    @staticmethod
    def _args(held: Held, ttl: float, indexed: bool) -> list[str]:
        return [held.holder, str(held.token), _ms(ttl), held.name if indexed else ""]


def _ms(seconds: float) -> str:
    return str(max(1, round(seconds * 1000)))

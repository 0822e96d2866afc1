"""The shared store: the same data in redis, for several bridge replicas (redis.asyncio).

Key layout under a configurable prefix (default "pi-bridge:", or `?prefix=` in the URL):

    conv:<key>                    string: ConversationRecord JSON
    conversations                 set of conversation keys (for listing)
    token:<token>                 string: DialogRecord JSON
    dialog:<quoted key>:<rid>     list of a dialog's tokens, in put order
    conv-dialogs:<key>            set of request ids with a pending dialog in <key>
    seen:<dedupe key>             "1" with a TTL (SET NX PX)
    audit / audit:<key>           lists of AuditEntry JSON, newest first, capped
    live-runs                     hash: conversation key → LiveRunRecord JSON
    schedule:<id>                 string: ScheduleRecord JSON
    schedules                     set of schedule ids (for listing)
    usage-seen:<quoted key>:<msg> "1" while the message's usage is kept (its retention)
    usage:<scope>:<name>          sorted set of UsageEntry JSON by time, one per
                                  conversation, person and chat
    raise:<name>                  a limit raised for a day: dollars (INCRBYFLOAT), TTL
    shown:<key>                   hash: what the key's hosted agent has shown so far
                                  (bridge/rpc/shown.py's snapshot), its host and the
                                  last record it covers

Multi-key reads and writes are MULTI transactions or Lua scripts, so other replicas never
see half of them; `take_dialog` is a script, which is what makes exactly one racing
caller win. The scripts derive token and dialog key names from prefixes passed in ARGV:
fine on a single redis server or a replicated one, not on Redis Cluster. Expiry is the
server's clock (the injected clock only drives sqlite). The URL may hold a password:
it appears only redacted, in messages and reprs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import AbstractBackoff
from redis.exceptions import RedisError

from bridge.backoff import Backoff
from bridge.spend.usage import UsageEntry, UsageTotals
from bridge.store.base import (
    AUDIT_CAP,
    RAISE_RETENTION,
    USAGE_RETENTION,
    StoreError,
    check_ttl,
    dialog_order,
    redact_url,
)
from bridge.store.records import AuditEntry, ConversationRecord, DialogRecord, LiveRunRecord
from bridge.store.schedule_record import ScheduleRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.spend.usage import UsageScope

DEFAULT_PREFIX = "pi-bridge:"
RETRIES = 6
RETRY_BACKOFF = Backoff(first=0.1, cap=1.0)  # 0.1 s doubling: 3.5 s over the six
PREFIX_PARAM = "prefix"  # URL query parameter naming the key prefix

# KEYS: dialog token list, conversation's dialog set. ARGV: token key prefix, request id.
_TAKE = """
local tokens = redis.call('LRANGE', KEYS[1], 0, -1)
if #tokens == 0 then return 0 end
for _, token in ipairs(tokens) do redis.call('DEL', ARGV[1] .. token) end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1
"""

# KEYS: conversation's dialog set. ARGV: dialog list prefix, token key prefix.
_DIALOGS_FOR = """
local out = {}
for _, rid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  for _, token in ipairs(redis.call('LRANGE', ARGV[1] .. rid, 0, -1)) do
    local value = redis.call('GET', ARGV[2] .. token)
    if value then out[#out + 1] = value end
  end
end
return out
"""

# KEYS: conversation, its dialog set, the conversation index.
# ARGV: conversation key, dialog list prefix, token key prefix.
_DELETE_CONVERSATION = """
for _, rid in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local list = ARGV[2] .. rid
  for _, token in ipairs(redis.call('LRANGE', list, 0, -1)) do
    redis.call('DEL', ARGV[3] .. token)
  end
  redis.call('DEL', list)
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return 1
"""

# KEYS: the live-run hash. ARGV: conversation key, message id. Checked and removed in one
# script, so a newer run's record put in between is never the one removed.
_DROP_LIVE_RUN = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value or cjson.decode(value)['message_id'] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
"""

# KEYS: the conversation's snapshot hash. ARGV: host, through, snapshot text.
_PUT_SHOWN = """
local old = redis.call('HMGET', KEYS[1], 'host', 'through')
if old[1] == ARGV[1] and tonumber(old[2]) > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'host', ARGV[1], 'through', ARGV[2], 'snapshot', ARGV[3])
return 1
"""

# KEYS: the message's seen key, then its conversation's, person's and chat's sorted sets.
# ARGV: retention in ms, the entry JSON, its time, the oldest time kept. Marked and
# added in one step, so a replay on another worker cannot add it a second time.
_ADD_USAGE = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
for i = 2, 4 do
  redis.call('ZADD', KEYS[i], ARGV[3], ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[4])
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return 1
"""

# KEYS: a usage sorted set. ARGV: since. Summed on the server, so a month of entries is
# never sent over; the figures come back as strings (Redis would cut a Lua float to an
# integer).
_SUM_USAGE = """
local n, input, output, cr, cw, cost = 0, 0, 0, 0, 0, 0
for _, text in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local e = cjson.decode(text)
  n = n + 1
  input = input + (e['input'] or 0)
  output = output + (e['output'] or 0)
  cr = cr + (e['cache_read'] or 0)
  cw = cw + (e['cache_write'] or 0)
  cost = cost + (e['cost'] or 0)
end
return {tostring(n), tostring(input), tostring(output), tostring(cr), tostring(cw),
        string.format('%.17g', cost)}
"""


class RedisStore:
    """`Store` on redis; open with `await RedisStore.open(url)`."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        label: str = "redis",
        audit_cap: int = AUDIT_CAP,
    ) -> None:
        self._redis = client
        self._prefix = prefix
        self._audit_cap = max(1, audit_cap)
        self._label = label  # the redacted URL, for messages
        self._take = client.register_script(_TAKE)
        self._dialogs_for = client.register_script(_DIALOGS_FOR)
        self._delete_conversation = client.register_script(_DELETE_CONVERSATION)
        self._drop_live_run = client.register_script(_DROP_LIVE_RUN)
        self._put_shown = client.register_script(_PUT_SHOWN)
        self._add_usage = client.register_script(_ADD_USAGE)
        self._sum_usage = client.register_script(_SUM_USAGE)

    @classmethod
    async def open(
        cls, url: str, *, prefix: str | None = None, audit_cap: int = AUDIT_CAP
    ) -> RedisStore:
        """Connect and check the server answers. `prefix` overrides `?prefix=` in the URL."""
        label = redact_url(url)
        client_url, url_prefix = split_prefix(url)
        try:
            # A Redis restart or failover drops the connections for a second or two:
            # commands are sent again on a new one rather than failing the bridge's
            # writes (the store's writes are idempotent, a dialog's taking excepted,
            # which then answers "already answered": never twice).
            retry = Retry(_Waits(RETRY_BACKOFF), RETRIES)
            client = aioredis.from_url(client_url, decode_responses=True, retry=retry)
        except ValueError as exc:
            raise ValueError(f"bad redis store URL {label}: {exc}") from None
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            await client.aclose()
            # `from None`: the chained exception adds nothing and must not carry the URL.
            raise StoreError(f"cannot reach the redis store at {label}: {exc}") from None
        chosen = prefix if prefix is not None else url_prefix
        return cls(
            client,
            prefix=DEFAULT_PREFIX if chosen is None else chosen,
            label=label,
            audit_cap=audit_cap,
        )

    @property
    def prefix(self) -> str:
        return self._prefix

    def __repr__(self) -> str:
        return f"RedisStore({self._label!r}, prefix={self._prefix!r})"

    # --- key names -------------------------------------------------------------------

    def _conv(self, key: str) -> str:
        return f"{self._prefix}conv:{key}"

    def _index(self) -> str:
        return f"{self._prefix}conversations"

    def _token_prefix(self) -> str:
        return f"{self._prefix}token:"

    def _dialog_prefix(self, key: str) -> str:
        # The conversation key is quoted so that "<key>:<rid>" cannot be read two ways.
        return f"{self._prefix}dialog:{quote(key, safe='')}:"

    def _conv_dialogs(self, key: str) -> str:
        return f"{self._prefix}conv-dialogs:{key}"

    def _seen(self, dedupe_key: str) -> str:
        return f"{self._prefix}seen:{dedupe_key}"

    def _audit(self, key: str | None) -> str:
        return f"{self._prefix}audit" if key is None else f"{self._prefix}audit:{key}"

    def _live_runs(self) -> str:
        return f"{self._prefix}live-runs"

    # --- conversations -------------------------------------------------------------

    async def get_conversation(self, key: str) -> ConversationRecord | None:
        text = await self._redis.get(self._conv(key))
        return None if text is None else ConversationRecord.model_validate_json(text)

    async def put_conversation(self, record: ConversationRecord) -> None:
        async with self._redis.pipeline(transaction=True) as tx:
            tx.set(self._conv(record.key), record.model_dump_json())
            tx.sadd(self._index(), record.key)
            await tx.execute()

    async def list_conversations(self) -> list[ConversationRecord]:
        keys = sorted(_text(member) for member in await self._redis.smembers(self._index()))
        if not keys:
            return []
        texts = await self._redis.mget([self._conv(key) for key in keys])
        # An index entry without its value is a conversation deleted between the two reads.
        return [ConversationRecord.model_validate_json(text) for text in texts if text is not None]

    async def delete_conversation(self, key: str) -> None:
        await self._delete_conversation(
            keys=[self._conv(key), self._conv_dialogs(key), self._index()],
            args=[key, self._dialog_prefix(key), self._token_prefix()],
        )
        # What its run showed goes with it: a conversation made anew under the key
        # must not take that back.
        await self._redis.delete(f"{self._prefix}shown:{key}")

    # --- dialogs ---------------------------------------------------------------------

    async def put_dialogs(self, records: Sequence[DialogRecord]) -> None:
        if not records:
            return
        async with self._redis.pipeline(transaction=True) as tx:
            for record in records:
                tokens = self._dialog_prefix(record.key) + record.request_id
                tx.set(self._token_prefix() + record.token, record.model_dump_json())
                # Re-putting a token moves it to the end instead of listing it twice.
                tx.lrem(tokens, 0, record.token)
                tx.rpush(tokens, record.token)
                tx.sadd(self._conv_dialogs(record.key), record.request_id)
            await tx.execute()

    async def get_dialog(self, token: str) -> DialogRecord | None:
        text = await self._redis.get(self._token_prefix() + token)
        return None if text is None else DialogRecord.model_validate_json(text)

    async def take_dialog(self, request_id: str, key: str) -> bool:
        removed = await self._take(
            keys=[self._dialog_prefix(key) + request_id, self._conv_dialogs(key)],
            args=[self._token_prefix(), request_id],
        )
        return bool(removed)

    async def dialogs_for(self, key: str) -> list[DialogRecord]:
        texts = await self._dialogs_for(
            keys=[self._conv_dialogs(key)], args=[self._dialog_prefix(key), self._token_prefix()]
        )
        records = [DialogRecord.model_validate_json(text) for text in texts]
        return sorted(records, key=dialog_order)

    # --- dedupe ----------------------------------------------------------------------

    async def seen(self, dedupe_key: str, ttl: float) -> bool:
        check_ttl(ttl)
        # Milliseconds so fractional ttls work; never 0, which redis rejects.
        millis = max(1, round(ttl * 1000))
        created = await self._redis.set(self._seen(dedupe_key), "1", nx=True, px=millis)
        return not created

    # --- audit -----------------------------------------------------------------------

    async def audit(self, entry: AuditEntry) -> None:
        text = entry.model_dump_json()
        async with self._redis.pipeline(transaction=True) as tx:
            for name in (self._audit(entry.key), self._audit(None)):
                tx.lpush(name, text)
                tx.ltrim(name, 0, self._audit_cap - 1)
            await tx.execute()

    async def audit_log(self, key: str | None = None, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []
        texts = await self._redis.lrange(self._audit(key), 0, limit - 1)
        return [AuditEntry.model_validate_json(text) for text in texts]

    # --- live runs -------------------------------------------------------------------

    async def put_live_run(self, record: LiveRunRecord) -> None:
        await self._redis.hset(self._live_runs(), record.key, record.model_dump_json())

    async def live_runs(self) -> list[LiveRunRecord]:
        texts = await self._redis.hgetall(self._live_runs())
        return [LiveRunRecord.model_validate_json(texts[key]) for key in sorted(texts)]

    async def drop_live_run(self, key: str, message_id: str) -> bool:
        removed = await self._drop_live_run(keys=[self._live_runs()], args=[key, message_id])
        return bool(removed)

    # --- schedules -------------------------------------------------------------------

    def _schedule(self, schedule_id: str) -> str:
        return f"{self._prefix}schedule:{schedule_id}"

    def _schedules(self) -> str:
        return f"{self._prefix}schedules"

    async def put_schedule(self, record: ScheduleRecord) -> None:
        async with self._redis.pipeline(transaction=True) as tx:
            tx.set(self._schedule(record.id), record.model_dump_json())
            tx.sadd(self._schedules(), record.id)
            await tx.execute()

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        text = await self._redis.get(self._schedule(schedule_id))
        return None if text is None else ScheduleRecord.model_validate_json(text)

    async def schedules(self, key: str | None = None) -> list[ScheduleRecord]:
        ids = sorted(_text(member) for member in await self._redis.smembers(self._schedules()))
        if not ids:
            return []
        texts = await self._redis.mget([self._schedule(i) for i in ids])
        # An id without its value is a schedule deleted between the two reads.
        found = [ScheduleRecord.model_validate_json(t) for t in texts if t is not None]
        return sorted(
            (r for r in found if key is None or r.key == key), key=lambda r: (r.created_at, r.id)
        )

    async def delete_schedule(self, schedule_id: str) -> bool:
        async with self._redis.pipeline(transaction=True) as tx:
            tx.delete(self._schedule(schedule_id))
            tx.srem(self._schedules(), schedule_id)
            removed, _ = await tx.execute()
        return bool(removed)

    async def aclose(self) -> None:
        await self._redis.aclose()

    # --- usage and raised limits ----------------------------------------------------

    def _usage(self, scope: UsageScope, name: str) -> str:
        return f"{self._prefix}usage:{scope}:{name}"

    async def add_usage(self, entry: UsageEntry) -> bool:
        seen = f"{self._prefix}usage-seen:{quote(entry.key, safe='')}:{entry.message}"
        sets = [self._usage(scope, entry.of(scope)) for scope in ("conversation", "person", "chat")]
        retention = round(USAGE_RETENTION * 1000)
        oldest = entry.at - USAGE_RETENTION
        added = await self._add_usage(
            keys=[seen, *sets], args=[retention, entry.model_dump_json(), entry.at, oldest]
        )
        return bool(added)

    async def usage_totals(self, scope: UsageScope, name: str, since: float) -> UsageTotals:
        sums = await self._sum_usage(keys=[self._usage(scope, name)], args=[since])
        n, input_, output, cache_read, cache_write, cost = (_text(v) for v in sums)
        return UsageTotals(
            messages=int(n),
            input=int(float(input_)),
            output=int(float(output)),
            cache_read=int(float(cache_read)),
            cache_write=int(float(cache_write)),
            cost=float(cost),
        )

    async def raise_limit(self, name: str, amount: float) -> float:
        key = f"{self._prefix}raise:{name}"
        async with self._redis.pipeline(transaction=True) as tx:
            tx.incrbyfloat(key, amount)
            tx.pexpire(key, round(RAISE_RETENTION * 1000))
            total, _ = await tx.execute()
        return float(total)

    async def raised(self, name: str) -> float:
        value = await self._redis.get(f"{self._prefix}raise:{name}")
        return 0.0 if value is None else float(value)

    # --- what a hosted agent's run has shown ----------------------------------------------

    async def put_shown(self, key: str, snapshot: str, *, host: str, through: int) -> bool:
        keys = [f"{self._prefix}shown:{key}"]
        return bool(await self._put_shown(keys=keys, args=[host, through, snapshot]))

    async def get_shown(self, key: str) -> str | None:
        value = await self._redis.hget(f"{self._prefix}shown:{key}", "snapshot")
        return None if value is None else _text(value)

    async def drop_shown(self, key: str) -> None:
        await self._redis.delete(f"{self._prefix}shown:{key}")


def split_prefix(url: str) -> tuple[str, str | None]:
    """Take our `prefix` query parameter out of the URL (redis-py would reject it)."""
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    prefix: str | None = None
    kept: list[tuple[str, str]] = []
    for name, value in params:
        if name == PREFIX_PARAM:
            prefix = value
        else:
            kept.append((name, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), prefix


def _text(value: bytes | str) -> str:
    # The client decodes responses; the bytes branch only satisfies redis-py's types.
    return value.decode() if isinstance(value, bytes) else value


class _Waits(AbstractBackoff):
    """redis-py's retries, waiting by the bridge's back-off rule (bridge/backoff.py)."""

    def __init__(self, backoff: Backoff) -> None:
        self._backoff = backoff

    def compute(self, failures: int) -> float:
        return self._backoff.delay(failures)  # redis-py counts failures from 1


__all__ = ["DEFAULT_PREFIX", "PREFIX_PARAM", "RedisStore", "split_prefix"]

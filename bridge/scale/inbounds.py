"""The inbounds of the conversations a worker owns: read, carried out, acknowledged.

Per conversation the inbounds arrive on their own stream (`in:<key>`), read
through one consumer group: the stream moves with the conversation's lease, so a
worker that takes a conversation over finds exactly its unfinished inbounds in the
group's pending list (the earlier owner's entries are claimed over to it), and no
conversation's backlog waits behind another's. One blocking XREADGROUP reads every
owned stream. An inbound is acknowledged (and removed) only once its conversation
carried it out (`Services.taken`), by a script that checks the lease's holder and
fencing token first: one refused means the lease is lost.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from redis.exceptions import RedisError, ResponseError

from bridge.scale.groups import ensure_group
from bridge.scale.names import OWNER, inbound_stream
from bridge.scale.wire import unwrap

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from bridge.model import Inbound
    from bridge.scale.lease import Leases
    from bridge.scale.owned import Owned
    from bridge.scale.stats import ScaleStats
    from bridge.service import Bridge

log = logging.getLogger(__name__)

BLOCK_MS = 250  # a newly owned stream joins the blocking read within this
RETRY_AFTER = 1.0  # s before an inbound that could not be taken in is read again


class Owner(Protocol):
    """What the inbounds need of the worker that owns their conversations."""

    owned: dict[str, Owned]
    claiming: bool  # False while draining: no new work is taken in

    def bridge_for(self, key: str) -> Bridge | None: ...

    async def lose(self, key: str) -> None: ...

    async def redis_failed(self, doing: str, exc: Exception, *, retry: bool = True) -> None: ...


class Inbounds:
    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        holder: str,
        stats: ScaleStats,
        leases: Leases,
        owner: Owner,
    ) -> None:
        self._redis = client
        self._prefix = prefix
        self._holder = holder
        self._stats = stats
        self._leases = leases
        self._owner = owner
        self._events: dict[str, str] = {}  # event id → conversation key, while in flight
        self._acks_in, self._acks = anyio.create_memory_object_stream[tuple[str, str]](10_000)

    def taken(self, inbound: Inbound) -> None:
        """`Services.taken`: acknowledge the inbound's entry."""
        key = self._events.pop(inbound.event_id, None)
        owned = self._owner.owned.get(key) if key is not None else None
        if key is None or owned is None:
            return
        entry = owned.inflight.pop(inbound.event_id, None)
        if entry is not None:
            owned.acking.add(entry)
            self._acks_in.send_nowait((key, entry))

    def forget(self, owned: Owned) -> None:
        """`owned` was let go of: its inbounds in flight are no one's to acknowledge."""
        for event in owned.inflight:
            self._events.pop(event, None)

    # --- reading ----------------------------------------------------------------------

    async def reading(self) -> None:
        while True:
            now = anyio.current_time()
            streams: dict[Any, Any] = {
                o.stream: o.cursor for o in self._owner.owned.values() if o.resume_at <= now
            }
            if not streams or not self._owner.claiming:  # draining: no new work is taken in
                await anyio.sleep(BLOCK_MS / 1000)
                continue
            found = await self._read(streams)
            if found is None:
                continue
            self._caught_up(found)
            for stream, entries in found:
                for entry_id, fields in entries:
                    await self._hand(str(stream), str(entry_id), fields)

    async def _read(self, streams: dict[Any, Any]) -> list[Any] | None:
        """One blocking read of the owned streams; None when it failed (dealt with:
        the next read goes on)."""
        try:
            found: Any = await self._redis.xreadgroup(
                OWNER,
                self._holder,
                streams,
                count=20,
                block=BLOCK_MS,
            )
        except ResponseError as exc:
            if "UNBLOCKED" in str(exc):
                return None  # a stream of this read was dropped (a conversation let go)
            if "NOGROUP" in str(exc):
                await self._regroup()
            else:
                await self._owner.redis_failed("reading inbounds", exc)
            return None
        except RedisError as exc:
            # What this read was answered may be lost with the connection: those
            # entries are pending under this worker's name now; read them again.
            for owned in self._owner.owned.values():
                owned.cursor = "0"
            await self._owner.redis_failed("reading inbounds", exc)
            return None
        return list(found or ())

    def _caught_up(self, found: list[Any]) -> None:
        """A pending read that found none of a stream's entries: done with them."""
        returned = {str(s) for s, e in found if e}
        for owned in list(self._owner.owned.values()):
            if owned.cursor != ">" and owned.stream not in returned:
                owned.cursor = ">"

    async def _hand(self, stream: str, entry_id: str, fields: dict[str, str]) -> None:
        key = stream.removeprefix(inbound_stream(self._prefix, ""))
        owned = self._owner.owned.get(key)
        if owned is None:
            return
        if owned.cursor != ">":
            owned.cursor = entry_id
            if entry_id in owned.inflight.values() or entry_id in owned.acking:
                return  # read again with the pending ones: being carried out, or done
        bridge = self._owner.bridge_for(key)
        try:
            inbound, arrived = unwrap(fields.get("e", ""))
        except ValueError:
            log.warning("%s: an unreadable inbound was dropped", key)
            self._acks_in.send_nowait((key, entry_id))
            return
        if not inbound.event_id:
            inbound = dataclasses.replace(inbound, event_id=f"entry:{entry_id}")
        wall = time.time()
        if owned.cursor == ">":  # a first read: how long it waited in Redis
            self._stats.stream_lag.observe(max(0.0, wall - int(entry_id.split("-")[0]) / 1000))
        if bridge is None:
            return
        owned.inflight[inbound.event_id] = entry_id
        self._events[inbound.event_id] = key
        services = bridge.services
        since = services.clock() - max(0.0, wall - arrived) if arrived else None
        log.debug(
            "%s: entry %s (%s) handed in, cursor %s", key, entry_id, inbound.event_id, owned.cursor
        )
        try:
            delivered = await bridge.supervisor.deliver(inbound, since)
        except Exception:
            log.exception("%s: could not take an inbound in; it is read again", key)
            delivered = False
        if not delivered:  # left pending: read again shortly (or by the next owner)
            owned.inflight.pop(inbound.event_id, None)
            self._events.pop(inbound.event_id, None)
            owned.cursor = "0"
            owned.resume_at = anyio.current_time() + RETRY_AFTER

    async def _regroup(self) -> None:
        """Redis lost the groups (restarted without its data): make them again."""
        for owned in list(self._owner.owned.values()):
            try:
                await ensure_group(self._redis, owned.stream, OWNER)
            except RedisError as exc:
                await self._owner.redis_failed("making a consumer group", exc)
                return

    # --- acknowledging ------------------------------------------------------------------

    async def acking(self) -> None:
        async for key, entry in self._acks:
            owned = self._owner.owned.get(key)
            if owned is None:
                continue
            while True:
                try:
                    ok = await self._leases.ack(owned.held, owned.stream, OWNER, entry)
                    break
                except RedisError as exc:
                    await self._owner.redis_failed("acknowledging an inbound", exc)
            owned.acking.discard(entry)
            if not ok:
                await self._owner.lose(key)

"""A worker: owns conversations by lease, carries out their inbounds, runs their agents.

Loops: claims (a conversation with no owner, while there is room: `max_agents`),
reading and acknowledging the owned conversations' inbounds (`Inbounds`,
inbounds.py), renewing (every third of `lease_ttl`; a lease found lost, or not
confirmed by Redis for a whole `lease_ttl`, is let go of at once: agent stopped,
nothing more touched), taking over (every second: conversations whose owner's lease
lapsed), and a sweep (stale claims, idle conversations handed back).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from redis.exceptions import RedisError

from bridge.scale.groups import ensure_group, forever, take_pending
from bridge.scale.inbounds import Inbounds
from bridge.scale.lease import Leases
from bridge.scale.names import OWNER, WORKERS, claims_stream, inbound_stream
from bridge.scale.owned import Owned, WorkerSettings

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from anyio.abc import TaskStatus

    from bridge.model import Inbound
    from bridge.scale.stats import ScaleStats
    from bridge.service import Bridge

log = logging.getLogger(__name__)

SWEEP_BATCH = 100
# How often a worker with room looks for lapsed leases: a dead worker's conversations
# are taken over at most `lease_ttl` (its last renewal's lease running out) and this
# long after it died. Before, the look came with the sweep (lease_ttl / 2): up to
# 22.5 s with the 15 s lease, 14.8-20.8 s measured.
TAKEOVER_POLL = 1.0
TAKEOVERS_AT_ONCE = 8  # a dead worker's conversations claimed side by side, at most
RELEASE_FLUSH = 10.0  # s a handed-back conversation's last chat output may take


class Worker:
    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        settings: WorkerSettings,
        stats: ScaleStats,
    ) -> None:
        self._redis = client
        self._prefix = prefix
        self.settings = settings
        self._stats = stats
        self._leases = Leases(client, prefix)
        self.bridges: list[Bridge] = []  # one per platform, set before `run`
        self.owned: dict[str, Owned] = {}
        # Being claimed now: the claims, stale claims and takeover loops may each come
        # to one key, and a claim waits on Redis and the agent's start between its check
        # of `owned` and its entry there.
        self._claiming: set[str] = set()
        self.claiming = True
        self.inbounds = Inbounds(client, prefix, settings.holder, stats, self._leases, self)

    # --- what the bridges call ------------------------------------------------------

    def fence(self, key: str) -> int:
        owned = self.owned.get(key)
        return owned.held.token if owned is not None else 0

    def taken(self, inbound: Inbound) -> None:
        """`Services.taken`: acknowledge the inbound's entry."""
        self.inbounds.taken(inbound)

    # --- running --------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._own_back)
            inbounds = (self.inbounds.acking, self.inbounds.reading)
            loops = (self._renewing, *inbounds, self._claims, self._sweeping, self._taking_over)
            for loop in loops:
                tg.start_soon(forever, loop)
            task_status.started()
            await anyio.sleep_forever()

    async def _own_back(self) -> None:
        """At start: the conversations an earlier instance of this worker (its name)
        still holds are taken back at once, running agents and all, rather than left
        to lapse and move to another worker."""
        try:
            found = await self._leases.held_by(f"{self.settings.name}/")
        except RedisError as exc:
            await self.redis_failed("looking for this worker's conversations", exc, retry=False)
            return
        for key in found:
            try:
                await self._claim(key, lapsed=True)
            except Exception:
                log.exception("taking %s back failed", key)
        if found:
            log.info("took back %d conversation(s) this worker held", len(found))

    async def hand_over(self, *, running_too: bool = False) -> None:
        """Stop claiming; let go of every conversation not running (SIGTERM), or of
        every one (`running_too`: the bridges drained with `on_stop = "stop"`)."""
        self.claiming = False
        for key in list(self.owned):
            bridge = self.bridge_for(key)
            conversation = bridge.supervisor.conversations.get(key) if bridge else None
            if running_too or conversation is None or not conversation.busy:
                await self._release(key)

    # --- claiming -------------------------------------------------------------------

    async def _claims(self) -> None:
        stream = claims_stream(self._prefix)
        ready = False
        while True:
            if not self.claiming or len(self.owned) >= self.settings.max_agents:
                await anyio.sleep(0.5)
                continue
            try:
                if not ready:
                    await ensure_group(self._redis, stream, WORKERS)
                    ready = True
                found: Any = await self._redis.xreadgroup(
                    WORKERS, self.settings.holder, {stream: ">"}, count=1, block=1000
                )
                for _s, entries in found or ():
                    for entry_id, fields in entries:
                        await self._claim(fields.get("k", ""))
                        await self._redis.xack(stream, WORKERS, entry_id)
            except RedisError as exc:
                ready = False
                await self.redis_failed("reading claims", exc)

    async def _claim(self, key: str, *, lapsed: bool = False) -> None:
        if key in self._claiming:
            return
        self._claiming.add(key)
        try:
            await self._claim_one(key, lapsed=lapsed)
        finally:
            self._claiming.discard(key)

    async def _claim_one(self, key: str, *, lapsed: bool) -> None:
        bridge = self.bridge_for(key)
        # Not while draining: a conversation taken over could not start here.
        if (
            key in self.owned
            or bridge is None
            or not (self.claiming and bridge.supervisor.accepting)
        ):
            return
        settings = self.settings
        mine = f"{settings.name}/"
        held = await self._leases.claim(key, settings.holder, settings.lease_ttl, mine_prefix=mine)
        if held is None:
            return
        stream = inbound_stream(self._prefix, key)
        await ensure_group(self._redis, stream, OWNER)
        # Whatever an earlier owner read and never finished is this worker's now.
        moved = await take_pending(self._redis, stream, OWNER, settings.holder)
        if lapsed or moved or (held.previous and held.previous != settings.holder):
            self._stats.lease_takeovers += 1
            log.info("took over %s (%d unfinished inbound(s))", key, moved)
        self.owned[key] = Owned(held, stream)
        self._stats.leases_held = len(self.owned)
        try:
            await bridge.supervisor.take_over(key)
        except Exception:
            log.exception("taking over %s failed", key)

    # --- renewing, releasing -----------------------------------------------------------

    async def _renewing(self) -> None:
        ttl = self.settings.lease_ttl
        confirmed = anyio.current_time()
        while True:
            await anyio.sleep(ttl / 3)
            keys = list(self.owned)
            try:
                results = await self._leases.renew_all([self.owned[k].held for k in keys], ttl)
            except RedisError as exc:
                self._stats.redis_errors += 1
                log.warning("could not renew %d lease(s): %s", len(keys), exc)
                if anyio.current_time() - confirmed >= ttl:
                    log.error("no lease confirmed for %g s: letting go of every conversation", ttl)
                    for key in keys:
                        await self.lose(key)
                continue
            confirmed = anyio.current_time()
            for key, ok in zip(keys, results, strict=True):
                if not ok:
                    await self.lose(key)

    async def lose(self, key: str) -> None:
        """The lease is another's now: stop this conversation here, touch nothing more."""
        if self._disown(key) is None:
            return
        self._stats.leases_lost += 1
        log.warning("%s: lease lost; its agent is stopped here", key)
        bridge = self.bridge_for(key)
        if bridge is not None:
            await bridge.supervisor.let_go(key)

    async def _release(self, key: str) -> None:
        if key not in self.owned:
            return
        bridge = self.bridge_for(key)
        if bridge is not None:  # still ours while its agent stops and its last ops go out
            await bridge.supervisor.let_go(key)
            with anyio.move_on_after(RELEASE_FLUSH):
                await bridge.outbox.flush(key)
        owned = self._disown(key)
        if owned is None:
            return
        try:
            if await self._leases.release(owned.held):
                await self._leases.drop_if_empty(owned.stream)
        except RedisError as exc:
            await self.redis_failed(f"releasing {key}", exc, retry=False)

    def _disown(self, key: str) -> Owned | None:
        owned = self.owned.pop(key, None)
        if owned is not None:
            self.inbounds.forget(owned)
            self._stats.leases_held = len(self.owned)
        return owned

    # --- sweeping ---------------------------------------------------------------------

    async def _sweeping(self) -> None:
        while True:
            await anyio.sleep(self.settings.lease_ttl / 2)
            try:
                await self._sweep()
            except RedisError as exc:
                await self.redis_failed("sweeping", exc, retry=False)

    async def _sweep(self) -> None:
        # Quiet conversations go back: their next message is claimed by whoever has room.
        for key, owned in list(self.owned.items()):
            bridge = self.bridge_for(key)
            in_memory = bridge is not None and key in bridge.supervisor.conversations
            if not in_memory and not owned.inflight and not await self._redis.xlen(owned.stream):
                await self._release(key)
        if self.claiming:
            await self._stale_claims()

    async def _taking_over(self) -> None:
        while True:
            await anyio.sleep(min(TAKEOVER_POLL, self.settings.lease_ttl / 3))
            try:
                await self._take_over()
            except RedisError as exc:
                await self.redis_failed("taking over lapsed leases", exc, retry=False)

    async def _take_over(self) -> None:
        """The conversations whose owner died (its lease lapsed), while there is room."""
        if not self.claiming:
            return
        lapsed = await self._leases.lapsed(SWEEP_BATCH)
        runs = [r for b in self.bridges for r in await b.store.live_runs()] if lapsed else []
        live = {r.key for r in runs}
        room = self.settings.max_agents - len(self.owned)
        wanted: list[str] = []
        for key, died in lapsed:
            if key in self.owned or key in self._claiming or len(wanted) >= room:
                continue
            # A worker that died holding it may have died mid-run before any trace of
            # the run reached the store: taken over, its chat is told what is known.
            if died or await self._left_work(key, live):
                wanted.append(key)
            else:
                await self._leases.forget(key)
        # Side by side: each claim waits for its take-over (an agent taken back through
        # its host), and one after another the last of a dead worker's dozens of
        # conversations would get its owner well past the bound of lease_ttl + 1 s.
        limit = anyio.CapacityLimiter(TAKEOVERS_AT_ONCE)
        async with anyio.create_task_group() as tg:
            for key in wanted:
                tg.start_soon(self._claim_lapsed, key, limit)

    async def _claim_lapsed(self, key: str, limit: anyio.CapacityLimiter) -> None:
        async with limit:
            try:
                await self._claim(key, lapsed=True)
            except RedisError as exc:
                await self.redis_failed(f"taking over {key}", exc, retry=False)

    async def _left_work(self, key: str, live: set[str]) -> bool:
        """Whether a conversation let go of still wants an owner: messages waiting,
        a run left live, or an agent running under its host."""
        if key in live or await self._redis.xlen(inbound_stream(self._prefix, key)):
            return True
        bridge = self.bridge_for(key)
        record = await bridge.store.get_conversation(key) if bridge is not None else None
        return record is not None and record.host is not None

    async def _stale_claims(self) -> None:
        """Claims a worker read and died before acting on."""
        stream = claims_stream(self._prefix)
        idle = int(self.settings.lease_ttl * 1000)
        reply: Any = await self._redis.xautoclaim(
            stream, WORKERS, self.settings.holder, idle, start_id="0-0", count=20
        )
        for entry_id, fields in reply[1]:
            if fields:
                await self._claim(fields.get("k", ""))
            await self._redis.xack(stream, WORKERS, entry_id)

    # --- helpers ------------------------------------------------------------------------

    def bridge_for(self, key: str) -> Bridge | None:
        return next((b for b in self.bridges if key.startswith(b.options.key_prefix)), None)

    async def redis_failed(self, doing: str, exc: Exception, *, retry: bool = True) -> None:
        self._stats.redis_errors += 1
        log.warning("%s failed: %s", doing, exc)
        if retry:
            await anyio.sleep(1.0)

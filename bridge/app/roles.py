"""`pi-bridge run --role frontend | worker`: the scale-out's two halves, assembled.

A frontend serves each configured platform as `--role all` does, but its bridges
forward what they admit (`bridge.scale.frontend.Forwarder`) and make the workers'
platform calls (`bridge.scale.calls.CallServer`); a platform that long-polls
(Telegram without a webhook) polls in one frontend at a time, by lease. A worker
runs a `Bridge` per platform whose adapter is remote (`RemoteAdapter`: pure parts
local, calls through a frontend) and whose conversations come and go with their
leases (`bridge.scale.worker`). What differs per platform is its descriptor's
(`bridge.app.platforms`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import socket
from typing import TYPE_CHECKING

import anyio
import redis.asyncio as aioredis

from bridge.app import serving
from bridge.platform import Forms
from bridge.scale.budget import SharedRates
from bridge.scale.calls import CallServer
from bridge.scale.forms import SharedForms
from bridge.scale.frontend import Forwarder, while_polling
from bridge.scale.lease import Leases
from bridge.scale.names import identity_key, scale_prefix
from bridge.scale.owned import WorkerSettings
from bridge.scale.remote import CallLink, RemoteAdapter
from bridge.scale.worker import Worker
from bridge.service import Bridge
from bridge.store.redis import DEFAULT_PREFIX, split_prefix

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.app.config import Loaded
    from bridge.app.metrics import Counted, Metrics
    from bridge.app.platforms import Configured
    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from bridge.scale.stats import ScaleStats
    from bridge.store.base import Store

log = logging.getLogger("bridge.cli")

IDENTITY_TTL = 24 * 60 * 60


@contextlib.asynccontextmanager
async def scale_redis(url: str) -> AsyncIterator[tuple[aioredis.Redis, str]]:
    """A client of the store's Redis, and the prefix the scale-out's keys live under."""
    client_url, prefix = split_prefix(url)
    client = aioredis.from_url(client_url, decode_responses=True, health_check_interval=10)
    try:
        yield client, scale_prefix(DEFAULT_PREFIX if prefix is None else prefix)
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()


async def frontend(
    loaded: Loaded, store: Store, metrics: Metrics, stopping: anyio.Event, stats: ScaleStats
) -> None:
    instance = f"{socket.gethostname()}-{secrets.token_hex(3)}"
    stats.role, stats.name = "frontend", instance
    ttl = loaded.config.worker.lease_ttl
    async with scale_redis(loaded.config.store) as (client, prefix):
        leases = Leases(client, prefix)
        forms = SharedForms(client, prefix)

        @contextlib.asynccontextmanager
        async def make(
            platform: Configured, adapter: Adapter, options: BridgeOptions, bot_name: str
        ) -> AsyncIterator[Counted]:
            if platform.traits.learns_name:  # workers route group mentions by it
                await client.set(identity_key(prefix, platform.name), bot_name, ex=IDENTITY_TTL)
            forward = Forwarder(client, prefix, options, stats, store)
            calls = CallServer(
                client, prefix, platform.name, adapter, instance, leases.current_token, stats, forms
            )
            if isinstance(adapter, Forms):  # a press may come to any frontend
                adapter.forms_elsewhere = forms.find
            bridge = Bridge(
                adapter,
                store,
                options,
                bot_name=bot_name,
                prefixes=platform.traits.commands,
                forward=forward,
                rates=SharedRates(client, prefix, platform.name, stats),
            )
            async with bridge, anyio.create_task_group() as tg:
                await tg.start(calls.run)
                yield metrics.counting(platform.name, bridge)
                tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            for platform in loaded.served:
                gate = None
                if platform.polls:  # one frontend at a time, by lease
                    gate = functools.partial(
                        while_polling, client, prefix, instance, ttl, stats, platform=platform.name
                    )
                tg.start_soon(serving.serve, platform, loaded.options, store, stopping, make, gate)


async def worker(
    loaded: Loaded, store: Store, metrics: Metrics, stopping: anyio.Event, stats: ScaleStats
) -> None:
    section = loaded.config.worker
    settings = WorkerSettings(
        name=section.name or socket.gethostname(),
        instance=secrets.token_hex(4),
        max_agents=section.max_agents,
        lease_ttl=section.lease_ttl,
    )
    stats.role, stats.name = "worker", settings.name
    async with scale_redis(loaded.config.store) as (client, prefix):
        worker = Worker(client, prefix, settings, stats)
        link = CallLink(client, prefix, settings.holder, stats)
        async with anyio.create_task_group() as tg:
            await tg.start(link.run)
            async with contextlib.AsyncExitStack() as stack:
                bridges: list[Bridge] = []
                for platform in loaded.served:
                    bot_name = ""
                    if platform.traits.learns_name:
                        bot_name = await _identity(client, prefix, platform.name, stopping)
                    remote = RemoteAdapter(platform.adapter(), link, platform.name, worker.fence)
                    options = platform.options(loaded.options)
                    bridge = Bridge(
                        remote,
                        store,
                        options,
                        bot_name=bot_name,
                        prefixes=platform.traits.commands,
                        shared=True,
                        taken=worker.taken,
                        # Its schedules' runs go where its messages go: to the owner.
                        scheduled_to=Forwarder(client, prefix, options, stats, store),
                        # Workspace-wide budgets are one budget for all workers.
                        rates=SharedRates(client, prefix, platform.name, stats),
                    )
                    bridges.append(await stack.enter_async_context(bridge))
                    metrics.counting(platform.name, bridge)
                worker.bridges = bridges
                await tg.start(worker.run)
                log.info(
                    "worker %s serving (up to %d conversations)",
                    settings.holder,
                    settings.max_agents,
                )
                await stopping.wait()
                log.info("worker %s: handing idle conversations over, then draining", settings.name)
                await worker.hand_over()
            # The bridges drained: with on_stop = "stop" nothing runs here any more;
            # with "detach" the running agents' leases are kept for this name's restart.
            if loaded.options.on_stop == "stop":
                await worker.hand_over(running_too=True)
            tg.cancel_scope.cancel()


async def _identity(
    client: aioredis.Redis, prefix: str, platform: str, stopping: anyio.Event
) -> str:
    """The bot's name as a frontend published it; waits for the first frontend."""
    key, told = identity_key(prefix, platform), False
    while not stopping.is_set():
        value = await client.get(key)
        if value is not None:
            return str(value)
        if not told:
            log.info("waiting for a frontend to publish the %s bot's name", platform)
            told = True
        await anyio.sleep(0.5)
    return ""

"""A frontend's part: admitted inbounds onto their conversation's stream, and the
long poll (Telegram's) run only while this frontend holds the platform's polling lease.

`Forwarder.deliver` fetches the inbound's files (only a frontend can: the URLs need
the platform's token), then one Lua script marks its delivery id seen, adds it to
`in:<key>` and, when the conversation has no owner, names it on the claims stream
for a worker with room to take. Marked and queued in one step: an update
redelivered, or polled again by the next frontend after a takeover, is dropped,
and one that failed to queue is not marked, so its redelivery goes through.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
from redis.exceptions import RedisError

from bridge.files.attachments import download
from bridge.model import AttachmentRefused, ChatRef
from bridge.scale.lease import Held, Leases
from bridge.scale.names import claims_stream, inbound_stream, poll_lease, seen_key
from bridge.scale.wire import Carried, envelope

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import redis.asyncio as aioredis

    from bridge.model import Attachment, Inbound
    from bridge.options import BridgeOptions
    from bridge.scale.stats import ScaleStats
    from bridge.store.base import Store

log = logging.getLogger(__name__)

CLAIMS_CAP = 100_000

# KEYS: inbound stream, lease, claims, seen ("" none). ARGV: envelope, key, seen ttl ms.
# → the entry id, or "" for a delivery id seen before.
# Marked seen only after the XADD: a script that fails halfway is not rolled back.
_FORWARD = """
if KEYS[4] ~= '' and redis.call('EXISTS', KEYS[4]) == 1 then return '' end
local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], '1', 'PX', ARGV[3]) end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', '100000', '*', 'k', ARGV[2])
end
return id
"""


class Forwarder:
    """`bridge.service.Forward` onto Redis."""

    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        options: BridgeOptions,
        stats: ScaleStats,
        store: Store | None = None,
    ) -> None:
        self._prefix = prefix
        self._options = options
        self._store = store
        self._stats = stats
        self._leases = Leases(client, prefix)
        self._forward = client.register_script(_FORWARD)

    async def deliver(self, inbound: Inbound, arrived: float) -> bool:
        inbound = await self._to_owner(inbound)
        carried = tuple([await self._carry(a) for a in inbound.attachments])
        raw = envelope(inbound, carried, arrived)
        seen = seen_key(self._prefix, inbound.event_id) if inbound.event_id else ""
        keys = [
            inbound_stream(self._prefix, inbound.key),
            self._leases.lease_key(inbound.key),
            claims_stream(self._prefix),
            seen,
        ]
        ttl = str(int(self._options.dedupe_ttl * 1000))
        try:
            entry = await self._forward(keys=keys, args=[raw, inbound.key, ttl])
        except RedisError:
            self._stats.redis_errors += 1
            raise  # the bridge leaves it unconfirmed: the platform delivers it again
        if not entry:
            log.debug("delivery %s seen before; dropped", inbound.event_id)
        else:
            log.debug("%s: %s queued as %s", inbound.key, inbound.event_id, entry)
        return True

    async def _to_owner(self, inbound: Inbound) -> Inbound:
        """A press on a copy of a question (an approver's direct message) goes to the
        conversation that asked it, which may be another worker's than the chat's own."""
        press, store = inbound.press, self._store
        if press is None or store is None or self._options.approvals.notify_approvers != "dm":
            return inbound
        record = await store.get_dialog(press.token)
        if record is None or record.key == inbound.key or inbound.chat.chat_id not in record.copies:
            return inbound
        chat = ChatRef(record.message_chat or inbound.chat.chat_id, record.message_thread)
        return replace(inbound, key=record.key, chat=chat)

    async def _carry(self, attachment: Attachment) -> Carried:
        data, refused = None, ""
        try:
            data = await download(attachment, self._options)
        except AttachmentRefused as exc:
            refused = str(exc)
        except Exception:  # the platform's, whatever it is: the sender is told
            log.warning("fetching an attachment failed", exc_info=True)
            refused = "it could not be fetched from the platform"
        return Carried(
            attachment.kind,
            attachment.mime_type,
            attachment.size,
            name=attachment.name,
            transcript=attachment.transcript,
            data=data,
            refused=refused,
        )


async def while_polling(
    client: aioredis.Redis,
    prefix: str,
    holder: str,
    ttl: float,
    stats: ScaleStats,
    poll: Callable[[], Awaitable[None]],
    *,
    platform: str = "telegram",
) -> None:
    """Run `poll`, the platform's long poll, only while this frontend holds its
    polling lease; cancelled, let the lease go so another frontend polls at once."""
    leases, lease, name = Leases(client, prefix), poll_lease(platform), platform.capitalize()
    while True:
        try:
            held = await leases.claim(lease, holder, ttl, indexed=False)
        except RedisError as exc:
            stats.redis_errors += 1
            log.warning("could not ask for the %s polling lease: %s", name, exc)
            held = None
        if held is None:
            await anyio.sleep(ttl / 3)
            continue
        log.info("polling %s (lease token %d)", name, held.token)
        stats.polling = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_poll_then_cancel, poll, tg.cancel_scope)
                await _keep(leases, held, ttl, stats)
                tg.cancel_scope.cancel()
            log.warning("lost the %s polling lease; another frontend polls now", name)
        finally:
            stats.polling = False
            with anyio.CancelScope(shield=True), anyio.move_on_after(2), suppress(RedisError):
                await leases.release(held, indexed=False)


async def _poll_then_cancel(poll: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
    await poll()
    scope.cancel()


async def _keep(leases: Leases, held: Held, ttl: float, stats: ScaleStats) -> None:
    """Renew until the lease is lost, or Redis has not confirmed it for most of `ttl`."""
    confirmed = anyio.current_time()
    while True:
        await anyio.sleep(ttl / 3)
        try:
            if not await leases.renew(held, ttl, indexed=False):
                return
            confirmed = anyio.current_time()
        except RedisError as exc:
            stats.redis_errors += 1
            log.warning("could not renew the polling lease %s: %s", held.name, exc)
            if anyio.current_time() - confirmed > ttl * 2 / 3:
                return  # it may lapse before Redis answers again: stop polling first

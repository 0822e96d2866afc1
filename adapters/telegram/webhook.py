"""Webhook mode: an aiohttp endpoint Telegram POSTs updates to, feeding the same
delivery path as long polling.

Invariants:
- A request without the right ``X-Telegram-Bot-Api-Secret-Token`` (the secret given
  to setWebhook) is answered 403 and reaches nothing.
- The answer is fast: an accepted update is queued and answered 200 at once; one
  worker hands queued updates to the bridge in arrival order (as polling does), so a
  slow photo download or a busy bridge never holds Telegram's request. When the
  queue is full the answer is 503 and Telegram delivers the update again later.
- An update_id seen recently is answered 200 and dropped (Telegram redelivers when
  an answer is late); the bridge's own dedupe by event id stays the guarantee.
- An update is queued as JSON and decoded by the delivery: one PTB cannot read is
  answered 200 like any other (Telegram would otherwise send it again and again) and
  skipped there, counted. A body that is no JSON object with an update_id is no
  update at all: 400.
- `close()` stops taking requests, then the worker finishes what was queued.
"""

from __future__ import annotations

import hmac
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio
from aiohttp import web

from bridge.admission import until_taken
from bridge.httpserver import READ_TIMEOUT, runner

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskStatus
    from telegram import Bot

log = logging.getLogger(__name__)

Json = dict[str, Any]

SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
QUEUE_SIZE: Final = 256  # accepted, not yet handed to the bridge
RECENT_IDS: Final = 4096  # update ids remembered for dedupe
CLOSE_TIMEOUT: Final = 5.0  # stopping the HTTP server (in-flight requests get this long)


class WebhookServer:
    """Serves Telegram's webhook POSTs on `host:port` at the webhook URL's path."""

    def __init__(
        self,
        bot: Bot,
        *,
        url: str,
        secret: str,
        host: str,
        port: int,
        deliver: Callable[[object], Awaitable[None]],
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        self.bot = bot
        self.read_timeout = read_timeout  # for a whole request (bridge/httpserver.py)
        self.path = urlsplit(url).path or "/"
        self.host, self.port = host, port
        self._secret = secret.encode()
        self._deliver = deliver
        self._send, self._receive = anyio.create_memory_object_stream[Json](QUEUE_SIZE)
        self._recent: OrderedDict[int, None] = OrderedDict()
        self._runner: web.AppRunner | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen, then hand queued updates on until `close()` and the queue is empty."""
        app = web.Application()
        app.router.add_post(self.path, self._post)
        self._runner = runner(app, self.read_timeout)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.host, self.port).start()
            task_status.started()
            async with self._receive:
                async for update in self._receive:
                    # Telegram was answered already: an update the bridge could not
                    # take in is handed in again here (bridge/admission.py).
                    await until_taken(self._deliver, update)
        finally:
            await self._stop_http()

    async def close(self) -> None:
        """Take no more requests; `run` returns once the queued updates are handled."""
        await self._stop_http()
        self._send.close()

    async def _stop_http(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                await runner.cleanup()

    async def _post(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            return web.Response(status=403)
        try:
            update: Any = await request.json()
        except ValueError:
            update = None
        update_id = update.get("update_id") if isinstance(update, dict) else None
        if not isinstance(update_id, int):  # Telegram never sends that
            log.warning("webhook: a request that is not an update was refused")
            return web.Response(status=400)
        if update_id in self._recent:
            return web.Response()
        try:
            self._send.send_nowait(update)
        except anyio.WouldBlock:
            return web.Response(status=503)  # Telegram tries again later
        except anyio.ClosedResourceError:
            return web.Response(status=503)  # shutting down: the next run gets it
        self._remember(update_id)
        return web.Response()

    def _remember(self, update_id: int) -> None:
        self._recent[update_id] = None
        while len(self._recent) > RECENT_IDS:
            self._recent.popitem(last=False)

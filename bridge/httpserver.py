"""The one way the bridge serves HTTP: an aiohttp runner that does not wait on slow clients.

Three endpoints listen (the Telegram webhook, Slack's HTTP mode, metrics), and aiohttp
alone would keep a connection open for as long as a client trickles its request in: a
few hundred half-sent requests hold as many sockets and tasks (slowloris). So:

- a connection must send a whole request head within `READ_TIMEOUT` of connecting (or
  of its previous request): aiohttp's keep-alive timer, which it arms at connection
  start, closes it otherwise;
- the body must arrive within `READ_TIMEOUT` of the head: read before the handler runs,
  else the connection is closed;
- bodies stay capped at aiohttp's default of 1 MiB (413 past it): the largest request
  any endpoint takes is a Slack event or a Telegram update, a few KB.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler, Middleware

# Telegram and Slack send a request in one go, in milliseconds; 10 s covers a slow
# proxy in between and still frees a stalled socket quickly.
READ_TIMEOUT = 10.0


def runner(app: web.Application, read_timeout: float = READ_TIMEOUT) -> web.AppRunner:
    """An `AppRunner` for `app` with the read deadlines above (call before setup)."""
    app.middlewares.append(_body_within(read_timeout))
    return web.AppRunner(app, keepalive_timeout=read_timeout, access_log=None, handle_signals=False)


def _body_within(seconds: float) -> Middleware:
    @web.middleware
    async def body_in_time(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.can_read_body:
            # asyncio's own timeout, not anyio's: aiohttp runs the handler in a plain
            # asyncio task and must not see a cancellation left pending on it.
            try:
                async with asyncio.timeout(seconds):
                    await request.read()  # kept by aiohttp: the handler reads it for free
            except TimeoutError:
                # Closed, not answered: aiohttp would wait on the unread body to finish
                # the request (seen with 3.14), which is what this is here to stop.
                if request.transport is not None:
                    request.transport.close()
                raise web.HTTPRequestTimeout from None
        return await handler(request)

    return body_in_time

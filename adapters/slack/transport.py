"""How Slack's deliveries reach bolt: Socket Mode, or HTTP; and what cannot be read.

`serve` runs bolt's Socket Mode handler (its close can hang ~10 s: bounded;
docs/design.md, "Platform libraries") or bolt's aiohttp app behind the bridge's HTTP runner
(each request whole within its read deadline, bridge/httpserver.py).

A delivery that cannot be read is acknowledged, counted and skipped. One bolt fails
on (an `event` that is no object: a middleware raises) would get bolt's 500, which
Slack answers by delivering it again; over HTTP, a body bolt cannot even turn into a
request (JSON that is no object) would fail the handler, unanswered too. Nothing will
ever read either, so each is logged (never its text: adapters/malformed.py), counted
as undecodable and acknowledged like a handled one. Only errors of a payload's shape
count so: another failure (Slack unreachable while bolt authorizes the request) keeps
bolt's answer, and Slack's redelivery; over HTTP, only a request signed by Slack is
acknowledged so. (A Socket Mode envelope whose payload is no object never reaches
bolt: slack_sdk drops it with a log line, unacknowledged, and Slack gives up on it.)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier

from adapters.malformed import SHAPE_ERRORS, skip_unreadable
from bridge.httpserver import READ_TIMEOUT, runner

if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware
    from anyio.abc import TaskStatus
    from slack_bolt.app.async_app import AsyncApp

    from adapters.slack.settings import SlackSettings

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 3.0  # close_async() can block ~10 s (docs/design.md, "Platform libraries")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _uncounted() -> None:
    """Counts nothing (a caller that keeps no count)."""


async def serve(
    app: AsyncApp,
    settings: SlackSettings,
    *,
    undecodable: Callable[[], None] = _uncounted,
    read_timeout: float = READ_TIMEOUT,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Receive Slack traffic until cancelled; `undecodable` counts a request over HTTP
    that bolt cannot read (bolt's error handler counts the rest: `acknowledging`)."""
    if settings.socket_mode:
        handler = AsyncSocketModeHandler(app, settings.app_token)
        try:
            await handler.connect_async()  # type: ignore[no-untyped-call]
            task_status.started()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                await handler.close_async()  # type: ignore[no-untyped-call]
        return
    web_app = app.web_app(path="/slack/events", port=settings.http_port)
    web_app.middlewares.append(http_acknowledging(settings.signing_secret, undecodable))
    http = runner(web_app, read_timeout)
    await http.setup()
    try:
        await web.TCPSite(http, settings.http_host, settings.http_port).start()
        task_status.started()
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
            await http.cleanup()


def acknowledging(count: Callable[[], None]) -> Callable[..., Awaitable[BoltResponse | None]]:
    """bolt's error handler (`AsyncApp.error`): a shape error of the payload is
    answered 200 (acknowledged); any other error keeps bolt's 500."""

    async def on_error(error: Exception, body: Any) -> BoltResponse | None:
        if isinstance(error, SHAPE_ERRORS):
            skip_unreadable(f"slack delivery {_delivery(body)}", error, count)
            return BoltResponse(status=200, body="")
        log.error("slack: a delivery failed; Slack will send it again", exc_info=error)
        return None

    return on_error


def http_acknowledging(signing_secret: str, count: Callable[[], None]) -> Middleware:
    """An aiohttp middleware for bolt's web app: a signed request bolt cannot read at
    all is answered 200 (acknowledged); an unsigned one 401, as bolt would."""
    verifier = SignatureVerifier(signing_secret)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except SHAPE_ERRORS as exc:
            body = await request.read()
            if not verifier.is_valid_request(body, dict(request.headers)):
                return web.Response(status=401)
            skip_unreadable("slack request", exc, count)
            return web.Response(status=200)

    return middleware


def _delivery(body: Any) -> str:
    """The delivery's id for the log: its event_id, else nothing."""
    found = body.get("event_id") if isinstance(body, dict) else None
    return str(found) if isinstance(found, str) else "(no event_id)"

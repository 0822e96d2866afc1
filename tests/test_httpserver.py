"""The HTTP endpoints do not wait on slow clients: half-sent requests are closed.

A slowloris client opens many connections and trickles each request in; aiohttp on
its own kept 200 of 200 open for good. Here, on real servers on 127.0.0.1 with a
short injected deadline: the generic runner, the metrics endpoint, the Telegram
webhook and Slack's HTTP mode each close a request whose head or body does not arrive
in time, and still serve a whole one.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from telegram import Bot

from adapters.slack.settings import SlackSettings
from adapters.slack.transport import serve as serve_slack
from adapters.telegram.webhook import WebhookServer
from bridge.app.metrics import Metrics, serve_metrics
from bridge.httpserver import runner
from tests.support.loopback import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

pytestmark = pytest.mark.anyio

DEADLINE = 0.5
HALF_HEAD = b"POST /hook HTTP/1.1\r\nHost: x\r\n"
HALF_BODY = b'POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":'


async def closed_within(port: int, payload: bytes, seconds: float) -> bytes | None:
    """What the server sent before closing the connection, or None if still open."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(payload)
        received = b""
        with anyio.move_on_after(seconds):
            try:
                while True:
                    received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
                return received
        return None


@contextlib.asynccontextmanager
async def hook_app() -> AsyncIterator[int]:
    async def hook(request: web.Request) -> web.Response:
        return web.Response(text=f"got {len(await request.read())}")

    app = web.Application()
    app.router.add_post("/hook", hook)
    served = runner(app, read_timeout=DEADLINE)
    await served.setup()
    port = free_port()
    await web.TCPSite(served, "127.0.0.1", port).start()
    try:
        yield port
    finally:
        await served.cleanup()


async def test_fifty_half_sent_requests_are_all_closed_and_a_whole_one_is_served() -> None:
    async with hook_app() as port:
        results: list[bytes | None] = []

        async def one(payload: bytes) -> None:
            results.append(await closed_within(port, payload, DEADLINE + 3))

        async with anyio.create_task_group() as tg:
            for n in range(50):
                tg.start_soon(one, HALF_HEAD if n % 2 else HALF_BODY)
        whole = (
            b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
        answer = await closed_within(port, whole, 5)
    assert None not in results  # every one closed by the server, none left hanging
    assert answer is not None
    assert b"200 OK" in answer
    assert b"got 2" in answer


async def test_a_body_over_the_cap_is_refused_without_reaching_the_handler() -> None:
    body = b"x" * (1024**2 + 1)  # aiohttp's own cap (`client_max_size`), which every app keeps
    head = f"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    async with hook_app() as port:
        answer = await closed_within(port, head + body, 5)
    assert answer is not None
    assert b"413" in answer.split(b"\r\n")[0]


async def serve_until(
    start: Callable[[anyio.abc.TaskGroup], Awaitable[None]], port: int, payload: bytes
) -> bytes | None:
    async with anyio.create_task_group() as tg:
        await start(tg)
        result = await closed_within(port, payload, DEADLINE + 3)
        tg.cancel_scope.cancel()
    return result


@pytest.mark.parametrize("payload", [HALF_HEAD, HALF_BODY], ids=["head", "body"])
async def test_the_metrics_endpoint_closes_a_half_sent_request(payload: bytes) -> None:
    port = free_port()

    async def start(tg: anyio.abc.TaskGroup) -> None:
        await tg.start(
            lambda task_status: serve_metrics(
                Metrics(), "127.0.0.1", port, read_timeout=DEADLINE, task_status=task_status
            )
        )

    assert await serve_until(start, port, payload) is not None


@pytest.mark.parametrize("payload", [HALF_HEAD, HALF_BODY], ids=["head", "body"])
async def test_the_telegram_webhook_closes_a_half_sent_request(payload: bytes) -> None:
    port = free_port()

    async def deliver(_update: object) -> None:
        raise AssertionError("nothing may be delivered")

    server = WebhookServer(
        Bot("1:x", base_url="http://127.0.0.1:9/bot"),
        url=f"http://127.0.0.1:{port}/hook",
        secret="s3cret-value",
        host="127.0.0.1",
        port=port,
        deliver=deliver,
        read_timeout=DEADLINE,
    )

    async def start(tg: anyio.abc.TaskGroup) -> None:
        await tg.start(server.run)

    assert await serve_until(start, port, payload) is not None


@pytest.mark.parametrize("payload", [HALF_HEAD, HALF_BODY], ids=["head", "body"])
async def test_slack_http_mode_closes_a_half_sent_request(payload: bytes) -> None:
    port = free_port()
    settings = SlackSettings(
        bot_token="xoxb-1", signing_secret="s3cret-value", http_host="127.0.0.1", http_port=port
    )
    # Nothing may reach Slack: the client points at a closed port.
    client = AsyncWebClient(token=settings.bot_token, base_url="http://127.0.0.1:9/")
    app = AsyncApp(signing_secret=settings.signing_secret, client=client)
    at_events = payload.replace(b"/hook", b"/slack/events")

    async def start(tg: anyio.abc.TaskGroup) -> None:
        await tg.start(
            lambda task_status: serve_slack(
                app, settings, read_timeout=DEADLINE, task_status=task_status
            )
        )

    assert await serve_until(start, port, at_events) is not None

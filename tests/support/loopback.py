"""Loopback plumbing for tests: start a fake server's aiohttp app on 127.0.0.1 at a free
port, find a free port for a server the code under test starts (tests talk to
nothing else), and wait for what such a server records."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import anyio
from aiohttp import web

if TYPE_CHECKING:
    from collections.abc import Callable

POLL = 0.01  # s between looks at a fake server's state


async def until(predicate: Callable[[], object], within: float) -> None:
    """Return once `predicate()` holds; TimeoutError after `within` seconds. Polled:
    the state is changed by request handlers, which signal nothing."""
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 (polls state the server changes)
            await anyio.sleep(POLL)


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the kernel's pick for an ephemeral bind)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def serve_on_loopback(app: web.Application) -> tuple[web.AppRunner, int]:
    """The running app's runner (`cleanup()` stops it) and the port it got."""
    # No access log or signal handlers: the tests own the process; a short shutdown
    # timeout so a held-open long poll does not slow teardown.
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])

"""`pi-bridge run` / `console`: the assembly of store, adapters and bridges, served.

`serve()` opens the store and the metrics endpoint, and runs each configured
platform (its adapter and a `Bridge` for it, `Bridge` options narrowed to the
platform) in one task group, or, with none configured, the terminal chat. SIGTERM
and SIGINT stop intake, let the bridges drain (runs may finish for the drain
timeout, agents are stopped, queued chat output is flushed) and return 0. Before any
agent starts the bridge makes itself non-dumpable and checks the sandbox can start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import secrets
import signal
import stat
import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from bridge.app import serving
from bridge.app.metrics import Metrics, serve_metrics
from bridge.app.platforms import PLATFORMS, for_platform, open_platforms
from bridge.containment.agent_user import KEPT_ROOT
from bridge.containment.sandbox import make_undumpable, parts_missing, probe

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine

    from adapters.console import ConsoleAdapter
    from bridge.app.config import Loaded
    from bridge.app.metrics import Counted
    from bridge.app.platforms import Configured
    from bridge.app.serving import MakeBridge
    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from bridge.store.base import Store

log = logging.getLogger("bridge.cli")


async def serve(loaded: Loaded, *, console: bool, stdin: TextIO | None = None) -> int:
    """Serve until a signal (or end of input for the terminal chat), then drain."""
    from bridge.store import open_store

    options = loaded.options
    for name in open_platforms(loaded.config):
        log.warning(
            "%s has no allowlist and PI_BRIDGE_ALLOW_EVERYONE is set: EVERYONE who finds the "
            "bot can make its agent run shell commands",
            name,
        )
    role = loaded.config.role
    if role != "all" and (console or not loaded.platforms):
        names = " or ".join(p.name for p in PLATFORMS)
        raise ValueError(f"a {role} serves a chat platform ({names}): configure at least one")
    if role != "frontend":  # a frontend runs no agent
        _contain_agents(options)
    store = await open_store(loaded.config.store, options.data_dir)
    metrics = Metrics()
    stopping = anyio.Event()
    tasks: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
    if role != "all":
        from bridge.app import roles
        from bridge.scale.stats import ScaleStats

        metrics.scale = stats = ScaleStats()
        serve_role = roles.frontend if role == "frontend" else roles.worker
        tasks[role] = lambda: serve_role(loaded, store, metrics, stopping, stats)
    elif console or not loaded.platforms:
        tasks["console"] = lambda: _console(options, store, metrics, stopping, stdin or sys.stdin)
    else:
        make = plain_bridges(store, metrics)
        for platform in loaded.served:
            tasks[platform.name] = functools.partial(
                serving.serve, platform, options, store, stopping, make
            )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, stopping)
            port = loaded.config.metrics.port
            if port is not None:
                await tg.start(serve_metrics, metrics, loaded.config.metrics.host, port)
                log.info("metrics on %s:%d", loaded.config.metrics.host, port)
            log.info("serving %s", ", ".join(loaded.platforms) or "the console")
            async with anyio.create_task_group() as platforms:
                for name, task in tasks.items():
                    platforms.start_soon(_named, name, task)
            tg.cancel_scope.cancel()  # the signal watcher and the metrics endpoint
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
    log.info("stopped")
    return 0


class PlatformFailed(Exception):
    """A platform stopped with an error; the message says which and why."""


async def _named(name: str, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        await task()
    except Exception as exc:
        # The operator needs "telegram: cannot connect", not a stack of library frames.
        log.debug("%s failed", name, exc_info=True)
        raise PlatformFailed(f"{name}: {described(exc)}") from exc


async def _watch_signals(stopping: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            if stopping.is_set():
                log.warning("already stopping; waiting for the drain to finish")
                continue
            log.info("%s: draining, then stopping", signal.Signals(signum).name)
            stopping.set()


async def _console(
    options: BridgeOptions, store: Store, metrics: Metrics, stopping: anyio.Event, stdin: TextIO
) -> None:
    from adapters.console import ConsoleAdapter
    from bridge.service import Bridge

    adapter = ConsoleAdapter()
    try:
        # A terminal chat ends when its person leaves it: its agents end with it.
        console = dataclasses.replace(for_platform(options, "console"), on_stop="stop")
        async with Bridge(adapter, store, console) as bridge:
            handler = metrics.counting("console", bridge)
            async with anyio.create_task_group() as tg:

                async def read_then_stop() -> None:
                    await _chat(handler, adapter, stdin)
                    stopping.set()  # end of input: leave like on a signal

                tg.start_soon(read_then_stop)
                await stopping.wait()
                tg.cancel_scope.cancel()
    finally:
        adapter.close()  # what is still live goes to the scrollback, even after a crash


async def _chat(handler: Counted, adapter: ConsoleAdapter, source: TextIO) -> None:
    """`adapters.console.chat`, but cancellable while waiting for input.

    A thread blocked in readline() cannot be cancelled, so a SIGTERM with stdin left
    open would never get to drain; pipes and terminals are polled instead.
    """
    adapter.out.write("Type a message. /help lists commands; /stop stops a run; Ctrl-D quits.\n")
    adapter.out.flush()
    # Delivery ids are remembered across restarts: make this run's unique.
    run_id, number = secrets.token_hex(4), 0
    async for raw in _lines(source):
        line = raw.strip()
        if not line:
            continue
        number += 1
        inbound = adapter.inbound(line, f"{run_id}-{number}")
        if inbound is not None:
            await handler.handle(inbound)


async def _lines(source: TextIO) -> AsyncIterator[str]:
    fd = source.fileno()
    if stat.S_ISREG(os.fstat(fd).st_mode):  # a file cannot block: read it plainly
        for line in source:
            yield line
        return
    buffer = b""
    while True:
        # Not pollable (e.g. /dev/null): reads return at once there anyway.
        with contextlib.suppress(OSError):
            await anyio.wait_readable(fd)
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for raw in complete:
            yield raw.decode("utf-8", "replace")
    if buffer:
        yield buffer.decode("utf-8", "replace")


def plain_bridges(store: Store, metrics: Metrics) -> MakeBridge:
    """`--role all`'s bridges: each does everything for its platform."""
    from bridge.service import Bridge

    @contextlib.asynccontextmanager
    async def make(
        platform: Configured, adapter: Adapter, options: BridgeOptions, bot_name: str
    ) -> AsyncIterator[Counted]:
        commands = platform.traits.commands
        async with Bridge(adapter, store, options, bot_name=bot_name, prefixes=commands) as bridge:
            yield metrics.counting(platform.name, bridge)

    return make


class SandboxUnavailable(Exception):
    """`sandbox.mode` is bwrap, but bwrap cannot start a sandbox on this machine."""


def _contain_agents(options: BridgeOptions) -> None:
    """Before any agent starts: the bridge non-dumpable, and the sandbox able to start."""
    if not make_undumpable():
        log.warning(
            "could not make the bridge non-dumpable: same-user processes may read its environment"
        )
    if options.agent.sandbox.mode == "off":
        log.warning(
            "agents run WITHOUT a sandbox (PI_BRIDGE_SANDBOX=off): they can read and write "
            "everything this user can, the store included (docs/security.md)"
        )
        return
    why = probe()
    if why is not None:
        raise SandboxUnavailable(
            f"{why}. Agents run in a bubblewrap sandbox by default: install the bubblewrap "
            "package (and allow user namespaces), or set PI_BRIDGE_SANDBOX=off to run them "
            "unsandboxed"
        )
    missing = parts_missing(options.agent.sandbox)
    if missing:
        raise SandboxUnavailable(f"{'; '.join(missing)}. Agents cannot start without it")
    if os.geteuid() == 0 and options.agent.sandbox.user in KEPT_ROOT:
        log.warning(
            "agents run as root ([sandbox] user = %r): without capabilities, but they can "
            "read root's own files (docs/security.md)",
            options.agent.sandbox.user,
        )


def described(exc: BaseException) -> str:
    """What failed, in words: a task group's failure is its tasks' errors, not
    "unhandled errors in a TaskGroup"; a platform's says which, already."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(described(e) for e in exc.exceptions)
    if isinstance(exc, PlatformFailed):
        return str(exc)
    return f"{type(exc).__name__}: {one_line(exc)}"


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]

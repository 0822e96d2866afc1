"""`pi-bridge`: the command line (`run`, `check`, `console`).

`run` serves every configured platform in one process, or, with none
configured (no tokens: the embedded defaults), the terminal chat. SIGTERM and
SIGINT stop intake, let the bridges drain (runs may finish for the drain
timeout, agents are stopped, queued chat output is flushed) and exit 0.
`check` validates the configuration and tries everything once: the agent
answers get_state, the store opens, each platform accepts its credentials.
Configuration mistakes are reported by setting name, never as a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import secrets
import signal
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from bridge.app.config import ConfigError, load_config, open_platforms
from bridge.logs import RedactedStream, TextOut, redactor, setup_logging
from bridge.metrics import Metrics, serve_metrics
from bridge.sandbox import contain, make_undumpable, probe

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping

    from adapters.console import ConsoleAdapter
    from bridge.app.config import Loaded
    from bridge.metrics import Counted
    from bridge.model import Adapter
    from bridge.options import BridgeOptions
    from bridge.store.base import Store

log = logging.getLogger("bridge.cli")

EXIT_CONFIG = 2  # the configuration is wrong: a restart will not help
CHECK_TIMEOUT = 30.0  # one check (an agent's first start can take a few seconds)

EPILOG = """\
configuration:
  A TOML file ($PI_BRIDGE_CONFIG, else ./pi-bridge.toml if present; see
  deploy/pi-bridge.example.toml) plus environment overrides. Secrets come only
  from the environment: TELEGRAM_BOT_TOKEN, SLACK_BOT_TOKEN, SLACK_APP_TOKEN,
  SLACK_SIGNING_SECRET. Other names: PI_BRIDGE_DATA_DIR (default ./data),
  PI_BRIDGE_STORE (sqlite or redis://...), PI_BRIDGE_AGENT_COMMAND,
  PI_BRIDGE_AGENT_ENV, PI_BRIDGE_METRICS_PORT, PI_BRIDGE_LOG_LEVEL,
  PI_BRIDGE_LOG_FORMAT (console or json).

examples:
  pi-bridge run        # no tokens set: chat with the agent in this terminal
  pi-bridge check      # is everything reachable? one line per check
"""


# --- run / console ---------------------------------------------------------------------


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
    _contain_agents(options)
    store = await open_store(loaded.config.store, options.data_dir)
    metrics = Metrics()
    stopping = anyio.Event()
    tasks: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
    if console or not loaded.platforms:
        tasks["console"] = lambda: _console(options, store, metrics, stopping, stdin or sys.stdin)
    else:
        if loaded.telegram is not None:
            tasks["telegram"] = lambda: _telegram(loaded, store, metrics, stopping)
        if loaded.slack is not None:
            tasks["slack"] = lambda: _slack(loaded, store, metrics, stopping)
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
        raise PlatformFailed(f"{name}: {type(exc).__name__}: {_one_line(exc)}") from exc


async def _watch_signals(stopping: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            if stopping.is_set():
                log.warning("already stopping; waiting for the drain to finish")
                continue
            log.info("%s: draining, then stopping", signal.Signals(signum).name)
            stopping.set()


def _for_platform(
    options: BridgeOptions,
    key_prefix: str,
    allowed: frozenset[str] | None = None,
    approvers: frozenset[str] = frozenset(),
) -> BridgeOptions:
    # Allowed users and approvers are platform user ids: they apply on their platform.
    return dataclasses.replace(
        options,
        allowed_users=allowed if allowed is not None else options.allowed_users,
        approvers=options.approvers | approvers,
        key_prefix=key_prefix,
    )


async def _console(
    options: BridgeOptions, store: Store, metrics: Metrics, stopping: anyio.Event, stdin: TextIO
) -> None:
    from adapters.console import ConsoleAdapter
    from bridge.service import Bridge

    adapter = ConsoleAdapter()
    async with Bridge(adapter, store, _for_platform(options, "console")) as bridge:
        handler = metrics.counting("console", bridge)
        async with anyio.create_task_group() as tg:

            async def read_then_stop() -> None:
                await _chat(handler, adapter, stdin)
                stopping.set()  # end of input: leave like on a signal

            tg.start_soon(read_then_stop)
            await stopping.wait()
            tg.cancel_scope.cancel()


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


async def _telegram(loaded: Loaded, store: Store, metrics: Metrics, stopping: anyio.Event) -> None:
    from adapters.telegram.runner import serve as serve_telegram
    from bridge.service import Bridge

    settings = loaded.telegram
    assert settings is not None
    options = _for_platform(loaded.options, "tg:", settings.allowed_users, settings.approvers)

    @contextlib.asynccontextmanager
    async def bridge_for(adapter: Adapter, bot_name: str) -> AsyncIterator[Counted]:
        async with Bridge(adapter, store, options, bot_name=bot_name) as bridge:
            yield metrics.counting("telegram", bridge)

    # `stop` rather than cancellation: the runner then confirms the handled updates.
    await serve_telegram(settings, bridge_for, stop=stopping)


async def _slack(loaded: Loaded, store: Store, metrics: Metrics, stopping: anyio.Event) -> None:
    from adapters.slack.groups import user_groups_in
    from adapters.slack.runner import PREFIXES, run_slack
    from bridge.service import Bridge

    settings = loaded.slack
    assert settings is not None
    options = _for_platform(loaded.options, "slack:", settings.allowed_users, settings.approvers)

    @contextlib.asynccontextmanager
    async def bridge_for(adapter: Adapter) -> AsyncIterator[Counted]:
        async with Bridge(adapter, store, options, prefixes=PREFIXES) as bridge:
            yield metrics.counting("slack", bridge)

    # Per-chat approvers may name user groups too; the intake resolves their members.
    groups = user_groups_in(*(chat.approvers for chat in options.chats.values()))
    await run_slack(settings, bridge_for, store, stop=stopping, user_groups=groups)


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


# --- check -------------------------------------------------------------------------------


async def check(loaded: Loaded, out: TextOut) -> int:
    """One line per check, ✓ or ✗; the number of failed checks."""
    source = str(loaded.source) if loaded.source else "defaults and environment"
    _say(out, True, f"config: valid ({source}); serving {', '.join(loaded.platforms) or 'console'}")
    for name in open_platforms(loaded.config):
        out.write(f"⚠ allowlist: {name} lets everyone in (PI_BRIDGE_ALLOW_EVERYONE=true)\n")
    checks: list[tuple[str, Callable[[], Awaitable[str]]]] = [
        ("sandbox", lambda: _check_sandbox(loaded.options)),
        ("agent", lambda: _check_agent(loaded.options)),
        ("store", lambda: _check_store(loaded)),
    ]
    if loaded.telegram is not None:
        checks.append(("telegram", lambda: _check_telegram(loaded)))
    if loaded.slack is not None:
        checks.append(("slack", lambda: _check_slack(loaded)))
    failed = 0
    for name, run in checks:
        try:
            with anyio.fail_after(CHECK_TIMEOUT):
                detail = await run()
        except TimeoutError:
            failed += 1
            _say(out, False, f"{name}: no answer within {CHECK_TIMEOUT:g} s")
        except Exception as exc:
            failed += 1
            _say(out, False, f"{name}: {_one_line(exc)}")
        else:
            _say(out, True, f"{name}: {detail}")
    return failed


def _say(out: TextOut, ok: bool, text: str) -> None:
    out.write(f"{'✓' if ok else '✗'} {text}\n")
    out.flush()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


async def _check_sandbox(options: BridgeOptions) -> str:
    mode = options.agent.sandbox.mode
    if mode == "off":
        return "off: agents run unsandboxed (PI_BRIDGE_SANDBOX=off)"
    why = await anyio.to_thread.run_sync(probe)
    if why is not None:
        raise SandboxUnavailable(f"{why}; agents cannot start (or set PI_BRIDGE_SANDBOX=off)")
    network = "network on" if options.agent.sandbox.network else "network off"
    return f"bwrap starts a sandbox ({network})"


async def _check_agent(options: BridgeOptions) -> str:
    from bridge.rpc import AgentClient, AgentSpec

    # A throwaway data dir: the agent may write there, and must not touch the real one.
    # It starts as it will serve: in its sandbox, where the mode says so.
    with tempfile.TemporaryDirectory(prefix="pi-bridge-check-") as scratch:
        root = Path(scratch)
        trial = dataclasses.replace(options, data_dir=root, chats={})
        (root / "workspace").mkdir()
        (root / "session").mkdir()
        spec = AgentSpec(argv=options.agent.argv, cwd=root / "workspace", env=options.agent.env)
        spec = contain(spec, trial, "check", root / "session")
        async with AgentClient(spec) as agent:
            state = await agent.get_state()
    model = state.get("model")
    name = model.get("id") if isinstance(model, dict) else None
    return f"{options.agent.argv[0]} answered get_state" + (f" (model {name})" if name else "")


async def _check_store(loaded: Loaded) -> str:
    from bridge.store import open_store
    from bridge.store.base import redact_url

    store = await open_store(loaded.config.store, loaded.options.data_dir)
    try:
        await store.seen(f"check:{secrets.token_hex(8)}", 60)
    finally:
        await store.aclose()
    where = loaded.options.data_dir if loaded.config.store.lower() == "sqlite" else None
    return f"{redact_url(loaded.config.store)} reachable" + (f" ({where})" if where else "")


async def _platform_call(
    url: str, secret: str, **kwargs: object
) -> tuple[dict[str, object], Mapping[str, str]]:
    """The JSON body of a POST to `url`, and the answer's headers."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=CHECK_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, **kwargs) as response,  # type: ignore[arg-type]
        ):
            body = await response.json(content_type=None)
            headers = response.headers  # aiohttp's: names stay case-insensitive
    except (aiohttp.ClientError, ValueError) as exc:
        # Telegram puts the token in the URL, and client errors quote URLs.
        raise RuntimeError(str(exc).replace(secret, "***")) from None
    if not isinstance(body, dict):
        raise RuntimeError(f"unexpected answer (HTTP {response.status})")
    return body, headers


async def _check_telegram(loaded: Loaded) -> str:
    settings = loaded.telegram
    assert settings is not None
    body, _ = await _platform_call(f"{settings.base_url}{settings.token}/getMe", settings.token)
    result = body.get("result")
    if not body.get("ok") or not isinstance(result, dict):
        raise RuntimeError(f"getMe refused: {body.get('description', 'no reason given')}")
    return f"getMe accepted the token (@{result.get('username')})"


async def _check_slack(loaded: Loaded) -> str:
    settings = loaded.slack
    assert settings is not None
    url = settings.api_base_url.rstrip("/") + "/auth.test"
    headers = {"Authorization": f"Bearer {settings.bot_token}"}
    body, answer = await _platform_call(url, settings.bot_token, headers=headers)
    if not body.get("ok"):
        raise RuntimeError(f"auth.test refused the bot token: {body.get('error', 'unknown')}")
    mode = "Socket Mode" if settings.socket_mode else "HTTP mode"
    who = body.get("user") or body.get("user_id")
    found = f"auth.test accepted the bot token (team {body.get('team')}, bot {who}; {mode})"
    return found + _scope_note(answer)


def _scope_note(headers: Mapping[str, str]) -> str:
    """What the token's scopes (Slack's `x-oauth-scopes` answer header) lack."""
    from adapters.slack.scopes import OPTIONAL, lacking

    granted = headers.get("x-oauth-scopes")
    if granted is None:
        return ""  # not reported: nothing to compare
    required, optional = lacking({s.strip() for s in granted.split(",")})
    reinstall = "add them to the app (deploy/slack-app-manifest.yaml) and reinstall it"
    if required:
        raise RuntimeError(f"the bot token lacks the scopes {', '.join(required)}: {reinstall}")
    if not optional:
        return ""
    features = ", ".join(f"{s} ({OPTIONAL[s]})" for s in optional)
    return f"; without {features}: {reinstall}"


# --- entry point ---------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pi-bridge",
        description="Chat with pi coding agents from Telegram, Slack or a terminal.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "run",
        help="serve every configured platform (none configured: the terminal chat)",
        description="Serve every configured platform; SIGTERM/SIGINT drain, then stop.",
    )
    sub.add_parser(
        "check",
        help="validate the config, start the agent once, reach the store and the platforms",
        description="One line per check (✓ or ✗); exits 1 if any check fails.",
    )
    sub.add_parser(
        "console",
        help="chat with the agent in this terminal (Ctrl-D quits)",
        description="The terminal chat, through the same router, renderer and outbox.",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command is None:
        parser().print_help()
        return EXIT_CONFIG
    # Everything printed from here on may quote a secret (a library's error message
    # with the bot token in it): it goes out through the same redactor as the logs.
    redact = redactor()
    out, err = RedactedStream(sys.stdout, redact), RedactedStream(sys.stderr, redact)
    setup_logging("WARNING")  # for what reading the configuration logs; set again below
    try:
        loaded = load_config()
    except ConfigError as exc:
        if args.command == "check":
            for problem in exc.problems:
                _say(out, False, f"config: {problem}")
        else:
            print(f"pi-bridge: {exc}", file=err)
        return EXIT_CONFIG
    console = args.command == "console" or (args.command == "run" and not loaded.platforms)
    level = loaded.config.log.level
    if console and "level" not in loaded.config.log.model_fields_set:
        level = "WARNING"  # the terminal chat shares the screen with the log
    setup_logging(level, loaded.config.log.format)
    try:
        if args.command == "check":
            failed = anyio.run(check, loaded, out)
            return 1 if failed else 0
        return anyio.run(lambda: serve(loaded, console=console))
    except KeyboardInterrupt:  # before the signal receiver was installed
        return 130
    except Exception as exc:
        # Startup failures (store unreachable, a platform refusing the token, a taken
        # metrics port) are operator problems: say what, not where in the code.
        log.debug("stopped by an error", exc_info=True)
        print(f"pi-bridge: {_describe(exc)}", file=err)
        return 1


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, PlatformFailed):
        return str(exc)
    return f"{type(exc).__name__}: {_one_line(exc)}"


if __name__ == "__main__":
    sys.exit(main())

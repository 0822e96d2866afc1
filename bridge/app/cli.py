"""`pi-bridge`: the command line (`run`, `check`, `console`), the console entry point.

`run` serves every configured platform in one process, or, with none
configured (no tokens: the embedded defaults), the terminal chat
(`bridge.app.run`). `check` validates the configuration and tries everything
once (`bridge.app.check`). Configuration mistakes are reported by setting name,
never as a traceback; so are startup failures.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import anyio

from bridge.app.check import check, say
from bridge.app.config import ConfigError, Loaded, load_config
from bridge.app.run import described, serve
from bridge.logs import RedactedStream, redactor, setup_logging

log = logging.getLogger("bridge.cli")

EXIT_CONFIG = 2  # the configuration is wrong: a restart will not help

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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pi-bridge",
        description="Chat with pi coding agents from Telegram, Slack or a terminal.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="serve every configured platform (none configured: the terminal chat)",
        description="Serve every configured platform; SIGTERM/SIGINT drain, then stop.",
    )
    run.add_argument(
        "--role",
        choices=("all", "frontend", "worker"),
        help="all (default): one process; frontend / worker: a scale-out on Redis "
        "(the same as PI_BRIDGE_ROLE)",
    )
    sub.add_parser(
        "check",
        help="validate the config, start the agent once, reach the store and the platforms",
        description="One line per check (✓ or ✗); exits 1 if any check fails.",
    )
    sub.add_parser(
        "stop-agents",
        help="end every agent left running under its host by a stopped bridge",
        description=(
            'With [agents] on_stop = "detach", agents outlive a stopped bridge until it '
            "starts again; this ends them on purpose (each host's agent is stopped in order)."
        ),
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
        role = getattr(args, "role", None)
        loaded = load_config({**os.environ, "PI_BRIDGE_ROLE": role} if role else None)
    except ConfigError as exc:
        if args.command == "check":
            for problem in exc.problems:
                say(out, False, f"config: {problem}")
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
        if args.command == "stop-agents":
            stopped = anyio.run(_stop_agents, loaded)
            print(f"stopped {stopped} agent(s) left running", file=out)
            return 0
        return anyio.run(lambda: serve(loaded, console=console))
    except KeyboardInterrupt:  # before the signal receiver was installed
        return 130
    except Exception as exc:
        # Startup failures (store unreachable, a platform refusing the token, a taken
        # metrics port) are operator problems: say what, not where in the code.
        log.debug("stopped by an error", exc_info=True)
        print(f"pi-bridge: {described(exc)}", file=err)
        return 1


async def _stop_agents(loaded: Loaded) -> int:
    from bridge.conversation.hosts import stop_all
    from bridge.store import open_store

    store = await open_store(loaded.config.store, loaded.options.data_dir)
    try:
        return await stop_all(store)
    finally:
        await store.aclose()


if __name__ == "__main__":
    sys.exit(main())

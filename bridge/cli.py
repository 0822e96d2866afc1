"""`pi-bridge`: the command line.

`run` serves the configured platforms; with none configured (the embedded
defaults) it opens the terminal chat. `console` always opens the terminal chat.
"""

from __future__ import annotations

import argparse
import os
import sys

import anyio

from bridge.paths import data_dir, default_agent_argv
from bridge.rpc import AgentSpec, AgentStartError, agent_environment


def console_spec() -> AgentSpec:
    workspace = data_dir() / "workspaces" / "console"
    sessions = data_dir() / "sessions" / "console"
    workspace.mkdir(parents=True, exist_ok=True)
    sessions.mkdir(parents=True, exist_ok=True)
    extra = os.environ.get("PI_BRIDGE_AGENT_ENV", "").split(",")
    argv = [*default_agent_argv(), "--session-dir", str(sessions), "--continue"]
    return AgentSpec(argv=argv, cwd=workspace, env=agent_environment(os.environ, extra))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pi-bridge",
        description="Chat with pi coding agents from Telegram, Slack or a terminal.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="serve the configured platforms (none: the terminal chat)")
    sub.add_parser("console", help="chat with the agent in this terminal")
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from adapters.console import chat

    try:
        return anyio.run(chat, console_spec())
    except AgentStartError as exc:
        print(f"pi-bridge: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

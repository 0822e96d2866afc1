"""`pi-bridge`: the command line.

`run` serves the configured platforms; with none configured (the embedded
defaults: sqlite store, no tokens) it opens the terminal chat. `console` always
opens the terminal chat, through the same router, renderer and outbox.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import anyio

from bridge.model import ConversationSettings
from bridge.options import AgentOptions, BridgeOptions
from bridge.paths import data_dir, default_agent_argv
from bridge.rpc import AgentStartError, agent_environment
from bridge.rpc.env import SecretInAgentEnv


def options_from_env() -> BridgeOptions:
    extra = os.environ.get("PI_BRIDGE_AGENT_ENV", "").split(",")
    agent = AgentOptions(argv=tuple(default_agent_argv()), env=agent_environment(os.environ, extra))
    return BridgeOptions(data_dir=data_dir(), agent=agent, settings=ConversationSettings())


async def console(options: BridgeOptions) -> int:
    from adapters.console import ConsoleAdapter, chat
    from bridge.service import Bridge
    from bridge.store import open_store

    adapter = ConsoleAdapter()
    store = await open_store(os.environ.get("PI_BRIDGE_STORE", "sqlite"), options.data_dir)
    try:
        async with Bridge(adapter, store, options) as bridge:
            await chat(bridge.handle, adapter, sys.stdin)
    finally:
        await store.aclose()
    return 0


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
    logging.basicConfig(level=os.environ.get("PI_BRIDGE_LOG_LEVEL", "WARNING").upper())
    try:
        return anyio.run(console, options_from_env())
    except (AgentStartError, SecretInAgentEnv) as exc:
        print(f"pi-bridge: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

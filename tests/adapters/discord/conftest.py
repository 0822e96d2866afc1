"""Fixtures of the Discord tests: a started fake Discord, and the real discord.py client
connected to it (`running`), with intents chosen per test; the bridge's options for the
default agent (`opts`, the end-to-end journeys)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import discord
import pytest

from tests.conftest import require_agent
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options
from tests.support.fake_discord import TOKEN, FakeDiscord

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome

READY_WITHIN = 10.0  # s for login, IDENTIFY, READY and GUILD_CREATE on loopback
# discord.py waits this long after the last GUILD_CREATE before on_ready (2 s by default).
GUILD_READY = 0.05


def make_client(*, content: bool = True, members: bool = True) -> discord.Client:
    """A discord.py Client with the default intents, plus message content and members
    (the privileged ones the fake's app has enabled) unless turned off."""
    intents = discord.Intents.default()
    intents.message_content = content
    intents.members = members
    return discord.Client(intents=intents, guild_ready_timeout=GUILD_READY)


@contextlib.asynccontextmanager
async def running(client: discord.Client, token: str = TOKEN) -> AsyncIterator[discord.Client]:
    """`client` logged in and connected until ready; closed (and its gateway task ended)
    on the way out. A connect that fails first (a refused IDENTIFY) raises its error."""
    async with client:
        await client.login(token)
        connecting = asyncio.create_task(client.connect())
        ready = asyncio.create_task(client.wait_until_ready())
        try:
            done, _ = await asyncio.wait(
                {connecting, ready}, timeout=READY_WITHIN, return_when=asyncio.FIRST_COMPLETED
            )
            if connecting in done:
                connecting.result()  # raises why the gateway refused
            if ready not in done:
                raise TimeoutError("discord.py did not get ready")
            yield client
        finally:
            ready.cancel()
            await client.close()
            await connecting  # ended by the close; re-raises a gateway error


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as started:
        yield started


@pytest.fixture
def opts(agent_home: AgentHome, tmp_path: Path) -> BridgeOptions:
    """Options for a bridge running the default pinned agent against the fake LLM."""
    require_agent(DEFAULT_VERSION)
    return options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())

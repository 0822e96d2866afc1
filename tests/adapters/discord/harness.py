"""The whole bridge on the fake Discord, for the end-to-end journeys: the real discord.py
client (`serve`) on the fake's REST API and gateway, a real `Bridge` with its sqlite
store, the real pi agent against the fake LLM; helpers that wait for what a person
would see."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

import anyio

from adapters.discord.convert import KEY_PREFIX
from adapters.discord.runner import make_client, serve
from adapters.discord.settings import DiscordSettings
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.fake_discord import ALICE, TOKEN, FakeDiscord

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from tests.support.fake_discord import Channel, Message

WAIT = 60.0  # generous: real agents start slowly on a busy two-core CI machine
GUILD_READY = 0.05  # s discord.py waits after the last GUILD_CREATE (2 s by default)


@contextlib.asynccontextmanager
async def discord_bridge(
    opts: BridgeOptions,
    *,
    on: FakeDiscord | None = None,
    allowed_users: frozenset[str] | None = frozenset({str(ALICE.id)}),
    allowed_roles: frozenset[str] = frozenset(),
    approvers: frozenset[str] = frozenset(),
    message_content: bool = True,
    allowed_channels: frozenset[str] | None = None,
) -> AsyncIterator[FakeDiscord]:
    """The fake Discord (enforcing Discord's rate limits) with the whole bridge on it,
    stopped on exit; `on`: a fake already running (a restart keeps Discord's state)."""
    async with contextlib.AsyncExitStack() as stack:
        fake = on
        if fake is None:
            fake = await stack.enter_async_context(FakeDiscord(enforce_limits=True))
        settings = DiscordSettings(
            token=TOKEN,
            allowed_users=allowed_users,
            allowed_roles=allowed_roles,
            approvers=approvers,
            api_url=fake.api_url,
            message_content=message_content,
            allowed_channels=allowed_channels,
        )
        # As the composition root narrows the options to the platform (bridge/app).
        narrowed = dataclasses.replace(
            opts,
            allowed_users=settings.allowed_users,
            approvers=opts.approvers | settings.approvers,
            key_prefix=KEY_PREFIX,
        )
        store = await open_store("sqlite", narrowed.data_dir)
        stack.push_async_callback(store.aclose)

        @contextlib.asynccontextmanager
        async def bridge_for(adapter: Adapter, name: str) -> AsyncIterator[Bridge]:
            async with Bridge(adapter, store, narrowed, bot_name=name) as bridge:
                yield bridge

        stop = anyio.Event()
        client = make_client(settings, guild_ready_timeout=GUILD_READY)
        connections = len(fake.gateway.connections)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve(settings, bridge_for, store, stop=stop, client=client))
            try:
                await fake.wait_for(lambda: len(fake.gateway.connections) > connections)
                await fake.connected()
                await fake.wait_for(lambda: fake.commands.get(None))  # synced
                yield fake
            finally:
                stop.set()


async def shown(fake: FakeDiscord, text: str, channel: int, within: float = WAIT) -> Message:
    """The bot's latest live message in `channel` containing `text`, once there is one."""

    def found() -> Message | None:
        message = fake.find(text, channel)
        return message if message is not None and message.from_bot else None

    return await fake.wait_for(found, within)


async def thread_of(fake: FakeDiscord, message: Message, within: float = WAIT) -> Channel:
    """The thread opened from `message` (it has the message's id)."""
    return await fake.wait_for(
        lambda: next((t for t in fake.threads if t.id == message.id), None), within
    )


def button(message: Message, label: str) -> str:
    """The custom_id of the button of `message` whose label contains `label`."""
    [found] = [custom_id for text, custom_id in message.buttons if label in text]
    return found

"""Run one bot: discord.py's `Client` on the gateway, the bridge it feeds, its commands.

`serve()` logs in (a bad token fails at once), syncs the slash commands, opens
the bridge, and holds the gateway connection until `stop`: messages and interactions
go to the `Intake`, which hands them to the bridge and returns at once
(docs/design.md, "Platform libraries": a waiting handler stalls button presses). In a
scale-out the connection is held by one frontend at a time (`poll_gate`, a lease), as
Telegram's long poll is; the next holder RESUMEs nothing and starts a new session.

Intents (events/gateway#gateway-intents): the default ones (servers, their messages,
DMs, reactions), and the privileged message-content intent when
`DiscordSettings.message_content` is on (enabled for the app in the Developer Portal;
without it IDENTIFY is refused, 4014). Without it Discord still sends the text of
DMs, of messages that mention the bot, and slash commands; the bot needs no other
privileged intent (a DM sender's roles are fetched, not cached).

Slash commands are the bridge's one command registry (`bridge.controls.table.COMMANDS`),
each with an optional `text` when it takes one, plus `/pi <task>` that starts a
conversation, synced globally at every start (a bulk overwrite: unchanged commands
keep their ids). Shutdown is bounded: the gateway stops first, then the bridge drains
(it still posts through the client's HTTP session), then the client closes.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

import aiohttp
import anyio
import discord
import discord.gateway
import discord.http
import yarl
from discord import app_commands

from adapters.discord.adapter import DiscordAdapter
from adapters.discord.convert import START_COMMAND, Me
from adapters.discord.failures import missing
from adapters.discord.intake import Intake
from adapters.discord.settings import PUBLIC_API
from bridge.controls.table import COMMANDS as REGISTRY
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from contextlib import AbstractAsyncContextManager

    from adapters.discord.settings import DiscordSettings
    from bridge.platform import Adapter, InboundHandler
    from bridge.store.base import Store

    PollGate = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT = 5.0  # s to close the gateway and the HTTP session
CHECK_TIMEOUT = 30.0  # s for one REST call of `pi-bridge check` (or the gateway's URL)
# discord.py waits out a 429 itself up to this long; a longer one reaches the outbox
# as RateLimited (30 s is the least discord.py takes).
MAX_RATELIMIT_WAIT = 30.0
DESCRIPTION_MAX = 100  # interactions/application-commands: description 1-100
START_SUMMARY = "start a conversation with the coding agent in a new thread"
# Application flags (resources/application#application-object-application-flags).
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT(_LIMITED)


class BridgeClient(discord.Client):
    """discord.py's client with the intake's handlers as its events."""

    intake: Intake | None = None

    async def on_message(self, message: discord.Message) -> None:
        if self.intake is not None:
            await self.intake.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        if self.intake is not None:
            await self.intake.on_interaction(interaction)


def make_client(settings: DiscordSettings, *, guild_ready_timeout: float = 2.0) -> BridgeClient:
    # The bot joins no voice channel (a voice message is a file): discord.py's warning
    # that voice channels need PyNaCl and davey says nothing to act on.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
    intents = discord.Intents.default()
    intents.message_content = settings.message_content
    return BridgeClient(
        intents=intents,
        allowed_mentions=discord.AllowedMentions.none(),
        max_ratelimit_timeout=MAX_RATELIMIT_WAIT,
        guild_ready_timeout=guild_ready_timeout,
    )


def build_adapter(settings: DiscordSettings) -> DiscordAdapter:
    """The bot's adapter (no call made yet; a worker's never connects)."""
    return DiscordAdapter(make_client(settings))


def command_tree(
    client: discord.Client, on_use: Callable[[discord.Interaction[Any]], Awaitable[None]]
) -> app_commands.CommandTree[Any]:
    """The slash commands: the registry's, and `/pi <task>`."""
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
    commands = [(START_COMMAND, START_SUMMARY, "the task")]
    commands += [(c.name, c.summary, c.usage) for c in REGISTRY.commands]
    for name, summary, usage in commands:
        tree.add_command(_command(name, summary, usage, on_use))
    return tree


def _command(
    name: str,
    summary: str,
    usage: str,
    on_use: Callable[[discord.Interaction[Any]], Awaitable[None]],
) -> app_commands.Command[Any, Any, None]:
    callback: Callable[..., Awaitable[None]]
    if usage:

        async def with_text(interaction: discord.Interaction[Any], text: str | None = None) -> None:
            await on_use(interaction)

        callback = app_commands.describe(text=clip(usage, DESCRIPTION_MAX))(with_text)
    else:

        async def bare(interaction: discord.Interaction[Any]) -> None:
            await on_use(interaction)

        callback = bare
    return app_commands.Command(
        name=name, description=clip(summary, DESCRIPTION_MAX), callback=callback
    )


@contextlib.contextmanager
def pointed_at(api_url: str, gateway: str | None) -> Iterator[None]:
    """discord.py's REST base and gateway set to another API's (the class attributes
    it reads: it has no per-client setting), put back after."""
    if api_url.rstrip("/") == PUBLIC_API:
        yield
        return
    saved = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = api_url.rstrip("/")
    if gateway:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)
    try:
        yield
    finally:
        discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved


async def api_get(settings: DiscordSettings, path: str) -> Any:
    """One authenticated GET on the REST API (`pi-bridge check`, the gateway's URL);
    the token never shows in an error."""
    url = settings.api_url.rstrip("/") + path
    headers = {"Authorization": f"Bot {settings.token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT)) as session,
            session.get(url, headers=headers) as response,
        ):
            body = await response.json(content_type=None)
            status = response.status
    except (aiohttp.ClientError, ValueError, TimeoutError) as exc:
        raise RuntimeError(str(exc).replace(settings.token, "***")) from None
    if status != 200:
        message = body.get("message") if isinstance(body, dict) else None
        raise RuntimeError(f"GET {path} refused (HTTP {status}): {message or 'no reason given'}")
    return body


async def check(settings: DiscordSettings) -> str:
    """`pi-bridge check`: Discord takes the token, the app has the intents asked for, and
    the bot's role has the permissions it needs in each of its servers."""
    me = await api_get(settings, "/users/@me")
    app = await api_get(settings, "/oauth2/applications/@me")
    flags = int(app.get("flags") or 0) if isinstance(app, dict) else 0
    found = f"the token is the bot @{me.get('username')} ({me.get('id')})"
    if settings.message_content and not flags & MESSAGE_CONTENT_FLAGS:
        raise RuntimeError(
            f"{found}, but its app has no Message Content intent: enable it in the Developer "
            "Portal (Bot, Privileged Gateway Intents), or set [discord] message_content = false"
        )
    intent = (
        "the Message Content intent is enabled"
        if settings.message_content
        else "without the message-content intent (mentions, DMs and slash commands)"
    )
    guilds = await api_get(settings, "/users/@me/guilds")
    lacking = [
        f"{guild.get('name')} ({guild.get('id')}) lacks {', '.join(gaps)}"
        for guild in guilds
        if (gaps := missing(int(guild.get("permissions") or 0)))
    ]
    if lacking:
        raise RuntimeError(f"{found}, but its role in " + "; in ".join(lacking))
    return f"{found}; {intent}; in {len(guilds)} server(s) with the permissions it needs"


async def serve(
    settings: DiscordSettings,
    # (adapter, bot name) → e.g. `Bridge(adapter, store, options)`; the name is "":
    # Discord's commands carry no "@bot" to read (only Telegram's "/cmd@bot" do).
    bridge_factory: Callable[[Adapter, str], AbstractAsyncContextManager[InboundHandler]],
    store: Store | None = None,
    *,
    stop: anyio.Event | None = None,
    poll_gate: PollGate | None = None,
    client: BridgeClient | None = None,
) -> None:
    """Serve the bot until `stop` is set (or this task is cancelled). `store` tells
    which threads the bridge has (after a restart); `poll_gate` holds the gateway
    connection while this frontend may."""
    client = client or make_client(settings)
    adapter = DiscordAdapter(client)
    gateway = None
    if settings.api_url.rstrip("/") != PUBLIC_API:
        gateway = str((await api_get(settings, "/gateway")).get("url") or "")
    with pointed_at(settings.api_url, gateway):
        async with client:
            await client.login(settings.token)  # fails fast on a bad token
            async with _bridge(settings, client, adapter, bridge_factory, store) as intake:
                await _connected(client, intake, adapter, stop, poll_gate)


@contextlib.asynccontextmanager
async def _bridge(
    settings: DiscordSettings,
    client: BridgeClient,
    adapter: DiscordAdapter,
    bridge_factory: Callable[[Adapter, str], AbstractAsyncContextManager[InboundHandler]],
    store: Store | None,
) -> AsyncIterator[Intake]:
    """The bridge open, its intake on the client's events, the commands synced."""
    assert client.user is not None  # logged in
    owns = None
    if store is not None:

        async def owns(key: str) -> bool:
            # A thread the bridge answered before a restart is still its conversation.
            return await store.get_conversation(key) is not None

    async with bridge_factory(adapter, "") as bridge:
        intake = Intake(
            adapter,
            Me(str(client.user.id)),
            bridge.handle,
            bridge.undecodable,
            settings.api_url,
            owns,
            allowed=settings.allowed_users,
            roles_named=settings.roles_named,
            allowed_channels=settings.allowed_channels,
        )
        tree = command_tree(client, intake.on_command)
        try:
            await tree.sync()
        except discord.HTTPException as exc:  # a convenience: the bot works without them
            log.warning("could not sync the slash commands: %s", exc)
        client.intake = intake
        try:
            yield intake
        finally:
            client.intake = None


async def _connected(
    client: BridgeClient,
    intake: Intake,
    adapter: DiscordAdapter,
    stop: anyio.Event | None,
    poll_gate: PollGate | None,
) -> None:
    async def connection() -> None:
        try:
            await client.connect(reconnect=True)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_TIMEOUT):
                if client.ws is not None:
                    await client.ws.close(code=1000)

    async def gated() -> None:
        await (connection() if poll_gate is None else poll_gate(connection))

    async with anyio.create_task_group() as tg:
        tg.start_soon(gated)
        tg.start_soon(adapter.typing.run)
        await (anyio.sleep_forever() if stop is None else stop.wait())
        tg.cancel_scope.cancel()

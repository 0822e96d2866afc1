"""The chat platforms the bridge serves, each described once (`PLATFORMS`).

A `Platform` holds everything the composition root does per platform: its name (its
table in the configuration, its label in logs and metrics, its streams in a
scale-out), what its conversation keys and commands start with, how its settings
are built from its section, how its runner serves it, how a worker makes its
adapter without connecting, what `pi-bridge check` asks of it, whether its bridges
take the bot's name and whether it long-polls (one frontend at a time, by lease).
What a platform can do besides the `Adapter` (streams, drafts, direct messages,
forms) is not listed: it is its adapter's, found with isinstance (`bridge.platform`).
The configuration binds each configured one to its settings (`Configured`), and
run.py, roles.py, serving.py and check.py only loop over those: a new platform is
its package under adapters/ and one entry here.

A platform section holds its settings' fields (see `bridge.app.schema`), so the
settings are the section's dump: a field added to `TelegramSettings` or
`SlackSettings` needs only its line in the section. What only the configuration
can tell (a token missing from a configured platform, a platform open to everyone)
becomes a problem line here; the settings' own invariants (e.g. a webhook needs its
secret) are checked by the settings themselves and reported the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from adapters.console import KEY as CONSOLE_KEY
from adapters.discord import convert as discord_convert
from adapters.discord import runner as discord_runner
from adapters.discord.settings import DiscordSettings
from adapters.slack import convert as slack_convert
from adapters.slack import runner as slack_runner
from adapters.slack.groups import user_groups_in
from adapters.slack.settings import SlackSettings
from adapters.telegram import convert as telegram_convert
from adapters.telegram import runner as telegram_runner
from adapters.telegram.settings import TelegramSettings
from bridge.app.schema import TELEGRAM_ONLY

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    import anyio
    from pydantic import BaseModel

    from bridge.app.schema import Config, DiscordSection, SlackSection, TelegramSection
    from bridge.options import BridgeOptions
    from bridge.platform import Adapter, InboundHandler
    from bridge.store.base import Store

    PollGate = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]

# Warnings about the configuration's contents are the configuration's.
log = logging.getLogger("bridge.app.config")


class Section(Protocol):
    """What every platform's section of the configuration has."""

    @property
    def allowed_users(self) -> list[str] | None: ...


class Settings(Protocol):
    """What every platform's settings have: who may use it, who may approve."""

    @property
    def allowed_users(self) -> frozenset[str] | None: ...

    @property
    def approvers(self) -> frozenset[str]: ...


T = TypeVar("T", bound=Section)
S = TypeVar("S", bound=Settings)
B = TypeVar("B")


@dataclass(frozen=True)
class Serving:
    """What a platform's runner is started with."""

    options: BridgeOptions  # narrowed to the platform
    store: Store
    stopping: anyio.Event  # set: stop taking updates, let the bridge drain, return
    # (its adapter, the bot's name or "") → its bridge's handler, for the block's life
    bridge: Callable[[Adapter, str], AbstractAsyncContextManager[InboundHandler]]
    poll_gate: PollGate | None = None  # runs its long poll while it may (a frontend's lease)


@dataclass(frozen=True, kw_only=True)
class Traits:
    """What names a platform and its conversations, settings aside."""

    name: str  # its table in the configuration; its label in logs, metrics and Redis
    key_prefix: str  # what its conversation keys start with (its `convert.KEY_PREFIX`)
    commands: tuple[str, ...] = ("/",)  # what a bridge command starts with
    # Its bridges take the bot's name, which its runner learns when it connects (a
    # frontend publishes it; a worker waits for it).
    learns_name: bool = False


@dataclass(frozen=True, kw_only=True)
class Platform(Traits, Generic[T, S]):
    """One chat platform: its traits, and how the app builds, serves and checks it."""

    section: Callable[[Config], T | None]  # its table, when the configuration has one
    settings: Callable[[T, list[str]], S | None]  # built from it (None: problem lines added)
    serve: Callable[[S, Serving], Awaitable[None]]  # its runner, until `stopping`
    adapter: Callable[[S], Adapter]  # a worker's: the platform's adapter, never connected
    check: Callable[[S], Awaitable[str]]  # `pi-bridge check`: what answered (raises: ✗)
    polls: Callable[[S], bool] = lambda _: False  # it long-polls: one frontend at a time

    def configured(self, config: Config, problems: list[str]) -> Configured | None:
        """The platform bound to its settings; None when it is not configured, or its
        settings are wrong (their problem lines added to `problems`)."""
        section = self.section(config)
        settings = None if section is None else self.settings(section, problems)
        if settings is None:
            return None
        return Configured(
            traits=self,
            settings=settings,
            serve=functools.partial(self.serve, settings),
            adapter=functools.partial(self.adapter, settings),
            check=functools.partial(self.check, settings),
            polls=self.polls(settings),
        )


@dataclass(frozen=True, kw_only=True)
class Configured:
    """A configured platform: its traits, its settings, and its parts bound to them."""

    traits: Traits
    settings: Settings
    serve: Callable[[Serving], Awaitable[None]]
    adapter: Callable[[], Adapter]
    check: Callable[[], Awaitable[str]]
    polls: bool

    @property
    def name(self) -> str:
        return self.traits.name

    def options(self, options: BridgeOptions) -> BridgeOptions:
        """The bridge's options narrowed to this platform."""
        settings = self.settings
        return for_platform(
            options, self.traits.key_prefix, settings.allowed_users, settings.approvers
        )


# --- Telegram ---------------------------------------------------------------------------


def telegram_settings(section: TelegramSection, problems: list[str]) -> TelegramSettings | None:
    if not section.token:
        # A [telegram] table (or a TELEGRAM_* setting) without its token is a half-done setup.
        problems.append("TELEGRAM_BOT_TOKEN (environment): not set, but Telegram is configured")
        return None
    if section.webhook_url and not section.webhook_secret:
        # A secret of this start's own: setWebhook hands it to Telegram at every start,
        # so no earlier secret (one an agent might have seen) is ever taken again.
        # Frontends sharing one webhook must set theirs (docs/configuration.md).
        section = section.model_copy(update={"webhook_secret": secrets.token_urlsafe(32)})
    built = settings_from(TelegramSettings, section, problems, "telegram", TELEGRAM_ONLY)
    if built is not None and section.paced_for_groups is not None:
        log.warning("telegram.paced_for_groups is no longer used: groups are paced per chat")
    return built


async def _serve_telegram(settings: TelegramSettings, serving: Serving) -> None:
    # `stop` rather than cancellation: the runner then confirms the handled updates.
    await telegram_runner.serve(
        settings, serving.bridge, stop=serving.stopping, poll_gate=serving.poll_gate
    )


# --- Slack ------------------------------------------------------------------------------


def slack_settings(section: SlackSection, problems: list[str]) -> SlackSettings | None:
    if not section.bot_token:
        problems.append("SLACK_BOT_TOKEN (environment): not set, but Slack is configured")
        return None
    return settings_from(SlackSettings, section, problems, "slack", frozenset())


async def _serve_slack(settings: SlackSettings, serving: Serving) -> None:
    def bridge_for(adapter: Adapter) -> AbstractAsyncContextManager[InboundHandler]:
        return serving.bridge(adapter, "")

    # Per-chat approvers may name user groups too; the intake resolves their members.
    groups = user_groups_in(*(chat.approvers for chat in serving.options.chats.values()))
    await slack_runner.run_slack(
        settings, bridge_for, serving.store, stop=serving.stopping, user_groups=groups
    )


# --- Discord ----------------------------------------------------------------------------


def discord_settings(section: DiscordSection, problems: list[str]) -> DiscordSettings | None:
    if not section.token:
        problems.append("DISCORD_BOT_TOKEN (environment): not set, but Discord is configured")
        return None
    return settings_from(DiscordSettings, section, problems, "discord", frozenset())


async def _serve_discord(settings: DiscordSettings, serving: Serving) -> None:
    # The gateway connection is held like Telegram's long poll: one frontend at a time.
    await discord_runner.serve(
        settings,
        serving.bridge,
        serving.store,
        stop=serving.stopping,
        poll_gate=serving.poll_gate,
    )


# --- the platforms ------------------------------------------------------------------------

PLATFORMS = (
    Platform(
        name="telegram",
        key_prefix=telegram_convert.KEY_PREFIX,
        learns_name=True,
        section=lambda config: config.telegram,
        settings=telegram_settings,
        serve=_serve_telegram,
        adapter=telegram_runner.build_adapter,
        check=telegram_runner.check,
        polls=lambda settings: not settings.webhook_url,
    ),
    Platform(
        name="slack",
        key_prefix=slack_convert.KEY_PREFIX,
        commands=slack_runner.PREFIXES,
        section=lambda config: config.slack,
        settings=slack_settings,
        serve=_serve_slack,
        adapter=slack_runner.build_adapter,
        check=slack_runner.check,
    ),
    Platform(
        name="discord",
        key_prefix=discord_convert.KEY_PREFIX,
        section=lambda config: config.discord,
        settings=discord_settings,
        serve=_serve_discord,
        adapter=discord_runner.build_adapter,
        check=discord_runner.check,
        polls=lambda _: True,
    ),
)
# What a conversation key starts with, for `[chats."<key>"]` and the projects' chats: each
# platform's, and the console's one conversation.
KEY_PREFIXES = (*(p.key_prefix for p in PLATFORMS), CONSOLE_KEY)


def configured(config: Config, problems: list[str]) -> tuple[Configured, ...]:
    """The configured platforms, in `PLATFORMS`' order, bound to their settings."""
    found = (platform.configured(config, problems) for platform in PLATFORMS)
    return tuple(c for c in found if c is not None)


def settings_from(
    build: Callable[..., B],
    section: BaseModel,
    problems: list[str],
    name: str,
    skip: frozenset[str],
) -> B | None:
    """`build(**fields of section)`, lists as frozensets (settings are frozen); the
    settings' own refusal (a ValueError) becomes a problem line of `name`."""
    fields: dict[str, Any] = section.model_dump(exclude=set(skip))
    try:
        return build(**{k: frozenset(v) if isinstance(v, list) else v for k, v in fields.items()})
    except ValueError as exc:
        problems.append(f"{name}: {exc}")
        return None


def open_platforms(config: Config) -> list[str]:
    """The platforms configured with no allowlist at all: open to everyone."""
    sections = ((p.name, p.section(config)) for p in PLATFORMS)
    return [name for name, s in sections if s is not None and s.allowed_users is None]


def open_to_everyone(config: Config) -> list[str]:
    """Problem lines for the open platforms, unless everyone is let in on purpose."""
    if config.allow_everyone:
        return []
    return [
        f"{name.upper()}_ALLOWED_USERS / {name}.allowed_users: not set, so anyone who finds "
        "the bot could make its agent run shell commands. List the user ids that may use it (an "
        "empty list lets nobody in, and the bot tells each person refused their id), or "
        "set PI_BRIDGE_ALLOW_EVERYONE=true to let everyone in on purpose"
        for name in open_platforms(config)
    ]


def for_platform(
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

"""Each configured platform's adapter settings, built from its validated section.

A platform section holds its settings' fields (see `bridge.app.schema`), so the
settings are the section's dump: a field added to `TelegramSettings` or
`SlackSettings` needs only its line in the section. What only the configuration
can tell (a token missing from a configured platform, a platform open to everyone)
becomes a problem line here; the settings' own invariants (e.g. a webhook needs its
secret) are checked by the settings themselves and reported the same way.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import TYPE_CHECKING, Any, TypeVar

from adapters.slack.settings import SlackSettings
from adapters.telegram.settings import TelegramSettings
from bridge.app.schema import TELEGRAM_ONLY

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

    from bridge.app.schema import Config, SlackSection, TelegramSection
    from bridge.options import BridgeOptions

S = TypeVar("S")


def settings_from(
    build: Callable[..., S],
    section: BaseModel,
    problems: list[str],
    name: str,
    skip: frozenset[str],
) -> S | None:
    """`build(**fields of section)`, lists as frozensets (settings are frozen); the
    settings' own refusal (a ValueError) becomes a problem line of `name`."""
    fields: dict[str, Any] = section.model_dump(exclude=set(skip))
    try:
        return build(**{k: frozenset(v) if isinstance(v, list) else v for k, v in fields.items()})
    except ValueError as exc:
        problems.append(f"{name}: {exc}")
        return None


def telegram_settings(
    section: TelegramSection | None, problems: list[str]
) -> TelegramSettings | None:
    if section is None:
        return None
    if not section.token:
        # A [telegram] table (or a TELEGRAM_* setting) without its token is a half-done setup.
        problems.append("TELEGRAM_BOT_TOKEN (environment): not set, but Telegram is configured")
        return None
    if section.webhook_url and not section.webhook_secret:
        # A secret of this start's own: setWebhook hands it to Telegram at every start,
        # so no earlier secret (one an agent might have seen) is ever taken again.
        # Frontends sharing one webhook must set theirs (docs/configuration.md).
        section = section.model_copy(update={"webhook_secret": secrets.token_urlsafe(32)})
    return settings_from(TelegramSettings, section, problems, "telegram", TELEGRAM_ONLY)


def slack_settings(section: SlackSection | None, problems: list[str]) -> SlackSettings | None:
    if section is None:
        return None
    if not section.bot_token:
        problems.append("SLACK_BOT_TOKEN (environment): not set, but Slack is configured")
        return None
    return settings_from(SlackSettings, section, problems, "slack", frozenset())


def open_platforms(config: Config) -> list[str]:
    """The platforms configured with no allowlist at all: open to everyone."""
    sections = (("telegram", config.telegram), ("slack", config.slack))
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

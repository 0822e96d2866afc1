"""Settings of the Telegram adapter: token, Bot API server, who may talk, group rules.

Frozen: built once at start (from the environment names in docs/design.md, or by
the configuration layer) and passed down. The token is a secret: `repr` hides it,
and it must never reach an agent's environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

GroupTrigger = Literal["mention", "all"]

PUBLIC_API = "https://api.telegram.org/bot"
PUBLIC_FILES = "https://api.telegram.org/file/bot"


@dataclass(frozen=True)
class TelegramSettings:
    token: str = field(repr=False)
    base_url: str = PUBLIC_API  # the token is appended (PTB's `base_url` convention)
    base_file_url: str = PUBLIC_FILES
    allowed_users: frozenset[str] | None = None  # None: anyone who can reach the bot
    approvers: frozenset[str] = frozenset()
    # In groups: "mention" takes only mentions, replies to the bot and commands.
    group_trigger: GroupTrigger = "mention"
    poll_timeout: int = 30  # seconds one getUpdates long poll may wait
    # Set: Telegram POSTs updates to this public HTTPS URL (its path is served) instead
    # of long polling; the secret is required (Telegram sends it in every request).
    webhook_url: str | None = None
    webhook_secret: str | None = field(default=None, repr=False)
    # Where the webhook endpoint listens: usually behind a TLS-terminating proxy.
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = 8443

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TelegramSettings:
        """Read the environment names fixed in docs/design.md."""
        env = os.environ if env is None else env
        token = env.get("TELEGRAM_BOT_TOKEN", "")
        if not token:
            raise ValueError("TELEGRAM_BOT_TOKEN is not set")
        return cls(
            token=token,
            base_url=env.get("TELEGRAM_API_BASE_URL") or PUBLIC_API,
            base_file_url=env.get("TELEGRAM_FILE_BASE_URL") or PUBLIC_FILES,
            allowed_users=_allowlist(env.get("TELEGRAM_ALLOWED_USERS", "")),
            approvers=_ids(env.get("TELEGRAM_APPROVERS", "")),
            webhook_url=env.get("TELEGRAM_WEBHOOK_URL") or None,
            webhook_secret=env.get("TELEGRAM_WEBHOOK_SECRET") or None,
            webhook_listen=env.get("TELEGRAM_WEBHOOK_LISTEN") or "127.0.0.1",
            webhook_port=int(env.get("TELEGRAM_WEBHOOK_PORT") or 8443),
        )


def _ids(value: str) -> frozenset[str]:
    return frozenset(part.strip() for part in value.split(",") if part.strip())


def _allowlist(value: str) -> frozenset[str] | None:
    """As bridge/app/config.py reads it: unset (or empty) is no list at all; a list set
    to nothing but commas names nobody, and lets nobody in."""
    return _ids(value) if value.strip() else None

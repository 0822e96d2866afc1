"""Settings of the Telegram adapter: token, Bot API server, who may talk, group rules.

Frozen: built once at start (by the configuration layer, `bridge.app`, from the
file and the environment names in docs/design.md) and passed down. The token is a
secret: `repr` hides it, and it must never reach an agent's environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

GroupTrigger = Literal["mention", "all"]
# "draft": answers stream as drafts in private chats (sendMessageDraft); "edit": by
# editing a sent message, as everywhere else.
Streaming = Literal["draft", "edit"]

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
    streaming: Streaming = "draft"

    def __post_init__(self) -> None:
        # The one check for the webhook's secret. Here, not in the configuration or the
        # runner, because both paths build these settings: the configuration reports
        # this ValueError as a problem line, and code that builds settings itself (tests,
        # bench/) cannot get a webhook that anyone who finds its URL could post updates
        # to as any user.
        if self.webhook_url and not self.webhook_secret:
            raise ValueError(
                "webhook_url is set but webhook_secret is not: set TELEGRAM_WEBHOOK_SECRET "
                "(without it anyone who finds the URL could post updates as any user)"
            )

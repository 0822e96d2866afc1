"""What the Slack adapter needs to run (built by the configuration layer, `bridge.app`).

Socket Mode is used when `app_token` is set (no public URL needed); otherwise the
bolt app serves HTTP on `http_port` and verifies requests with `signing_secret`.
Allowed users and approvers may be user ids or user group ids ("S…");
`allowed_channels` limits the channels the bot answers in (DMs are not channels).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from adapters.slack.groups import user_groups_in

DEFAULT_API_BASE_URL = "https://slack.com/api/"
DEFAULT_HTTP_PORT = 3000
# HTTP mode listens for Slack behind a TLS proxy (docs/security.md): local by default.
DEFAULT_HTTP_HOST = "127.0.0.1"
# How an answer appears while it grows: "stream" (chat.startStream in threads and DMs),
# or "edit" (posted, then edited with chat.update).
SlackStreaming = Literal["stream", "edit"]


@dataclass(frozen=True, slots=True)
class SlackSettings:
    bot_token: str
    app_token: str = ""
    signing_secret: str = ""
    api_base_url: str = DEFAULT_API_BASE_URL
    allowed_users: frozenset[str] | None = None  # None: everyone in the workspace
    approvers: frozenset[str] = field(default_factory=frozenset)
    allowed_channels: frozenset[str] | None = None  # None: every channel it is invited to
    http_port: int = DEFAULT_HTTP_PORT
    http_host: str = DEFAULT_HTTP_HOST
    # chat.update calls a minute over the workspace (Slack's Tier 3 guarantees 50).
    edits_per_minute: int = 50
    streaming: SlackStreaming = "stream"

    def __post_init__(self) -> None:
        if not self.bot_token:
            raise ValueError("SLACK_BOT_TOKEN is required")
        # The one check of the transport's secret (the configuration reports it as a
        # problem line; code that builds settings itself gets the same refusal).
        if not self.app_token and not self.signing_secret:
            raise ValueError(
                "SLACK_APP_TOKEN / SLACK_SIGNING_SECRET (environment): set one: "
                "the app token for Socket Mode, or the signing secret for HTTP mode"
            )

    @property
    def socket_mode(self) -> bool:
        return bool(self.app_token)

    @property
    def user_groups(self) -> frozenset[str]:
        """The user groups named among the allowed users and approvers."""
        return user_groups_in(self.allowed_users or (), self.approvers)

    def __repr__(self) -> str:
        # Tokens never reach logs or tracebacks.
        return f"SlackSettings(socket_mode={self.socket_mode}, api_base_url={self.api_base_url!r})"

"""What the Discord adapter needs to run (built by the configuration layer, `bridge.app`).

A bot connects through the gateway with its token. Who may use it is named by user id
and by role id: a member of an allowed role is let in (the runner puts a member's role
ids on the inbound's `Sender.groups`), so `allowed_users` ends up naming the allowed
roles too, as Slack's names user groups beside users; `approvers` may name either.
`api_url` points discord.py at another REST API (the tests' fake); its gateway is then
the one that API names (`GET /gateway`).

`message_content`: whether the bot asks for the privileged message-content intent
(enabled for the app in the Developer Portal). Without it Discord sends a guild
message's text only when the message mentions the bot; DMs, mentions and slash
commands work either way, but a message in a conversation's thread reaches the agent
only when it mentions the bot (docs/commands.md, "Discord").
"""

from __future__ import annotations

from dataclasses import dataclass, field

PUBLIC_API = "https://discord.com/api/v10"
# Where a text channel's thread is named from: the first characters of the task.
THREAD_NAME_MAX = 100  # resources/channel#start-thread-from-message: name 1-100


@dataclass(frozen=True)
class DiscordSettings:
    token: str = field(repr=False)
    allowed_users: frozenset[str] | None = None  # None: anyone who can reach the bot
    allowed_roles: frozenset[str] = frozenset()  # their members are allowed too
    approvers: frozenset[str] = frozenset()  # user or role ids
    # Channel ids the bot answers in (a thread counts as its channel's, a forum post as
    # its forum's; DMs are not channels); None: every channel it can see.
    allowed_channels: frozenset[str] | None = None
    api_url: str = PUBLIC_API
    message_content: bool = True  # the privileged intent (docs above)

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("DISCORD_BOT_TOKEN is required")
        if self.allowed_roles:
            # A role named is an allowlist of its own: nobody else gets in by it.
            named = (self.allowed_users or frozenset()) | self.allowed_roles
            object.__setattr__(self, "allowed_users", named)

    @property
    def roles_named(self) -> bool:
        """Whether any allowed or approving id may be a role (then members' roles are
        looked up for direct messages, where Discord names no member)."""
        return bool(self.allowed_roles) or bool(self.approvers)

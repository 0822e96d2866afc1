"""The bot token scopes the Slack adapter uses, and what each one is for.

`deploy/slack-app-manifest.yaml` grants all of them (a test holds the two
together); `pi-bridge check` compares them with the scopes Slack reports for the
token, so an app installed from an older manifest is named with what it lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

# Without these the bridge does not work on Slack.
REQUIRED: dict[str, str] = {
    "app_mentions:read": "mentions start conversations",
    "channels:history": "replies in threads of public channels",
    "groups:history": "replies in threads of private channels",
    "im:history": "direct messages",
    "chat:write": "every message the bot posts, answer streams, the thread status line",
    "files:write": "long output and exports as files",
}
# Without these one feature is missing; the rest works.
OPTIONAL: dict[str, str] = {
    "files:read": "files and images people share (saved in the workspace, or shown to the agent)",
    "reactions:write": "reactions on the messages the agent works on",
    "usergroups:read": "user groups as allowed users or approvers",
    "im:write": "approval questions copied to approvers' direct messages",
    "commands": "the /pi command",
}


def lacking(granted: Collection[str]) -> tuple[list[str], list[str]]:
    """The required and the optional scopes not in `granted`."""
    return (
        [s for s in REQUIRED if s not in granted],
        [s for s in OPTIONAL if s not in granted],
    )


def scope_note(headers: Mapping[str, str]) -> str:
    """What the token's scopes (Slack's `x-oauth-scopes` answer header) lack, as a
    note ("" when nothing); raises when a required scope is missing."""
    granted = headers.get("x-oauth-scopes")
    if granted is None:
        return ""  # not reported: nothing to compare
    required, optional = lacking({s.strip() for s in granted.split(",")})
    reinstall = "add them to the app (deploy/slack-app-manifest.yaml) and reinstall it"
    if required:
        raise RuntimeError(f"the bot token lacks the scopes {', '.join(required)}: {reinstall}")
    if not optional:
        return ""
    features = ", ".join(f"{s} ({OPTIONAL[s]})" for s in optional)
    return f"; without {features}: {reinstall}"

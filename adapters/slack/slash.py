"""`/pi` in a channel (pure): `/pi <task>` starts a thread conversation on that task.

Slack does not show a slash command's text to anyone, and slash commands cannot be
used in threads, so the bot posts the task as the thread's root ("@alice asked: …")
and the conversation lives under it as if the task had been a mention. In a DM the
task joins the DM's one conversation. `/pi` alone or `/pi help` is answered with
the usage, privately. Commands for a running conversation stay in its thread
(`!stop`, `!new`, …).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapters.malformed import ignore_malformed
from adapters.slack.convert import clean_text, dm_key, is_dm, press_ref, thread_key
from adapters.slack.format import fallback_text
from bridge.model import ChatRef, Inbound, Sender

if TYPE_CHECKING:
    from collections.abc import Mapping

    from adapters.slack.convert import Identity

COMMAND = "/pi"
USAGE = (
    "*/pi <task>* starts a conversation with the coding agent in a new thread here "
    "(mentioning me works too). Reply in that thread to go on; `!stop` there stops "
    "the agent, `!help` lists the other commands."
)
_HELP_WORDS = frozenset({"", "help", "?"})


@dataclass(frozen=True, slots=True)
class SlashTask:
    """A `/pi <task>` to start: where, by whom, and Slack's id for this delivery."""

    team: str
    channel: str
    user: str
    user_name: str
    text: str
    delivery: str

    @property
    def in_dm(self) -> bool:
        return is_dm(self.channel)

    @property
    def private_reply(self) -> str:
        """Where a note for the user alone goes (an ephemeral message)."""
        return press_ref(self.channel, self.user, "")


@ignore_malformed
def from_command(body: Mapping[str, Any], me: Identity) -> SlashTask | None:
    """The task a `/pi` command carries; None when it asks for the usage (or is
    not a command Slack would send)."""
    text = clean_text(str(body.get("text") or ""), me.user_id)
    channel, user = str(body.get("channel_id") or ""), str(body.get("user_id") or "")
    if text.lower() in _HELP_WORDS or not channel or not user:
        return None
    return SlashTask(
        team=str(body.get("team_id") or me.team_id),
        channel=channel,
        user=user,
        user_name=str(body.get("user_name") or ""),
        text=text,
        # Slack gives a command no event id; its trigger_id is unique per invocation.
        delivery=f"command:{body.get('trigger_id') or ''}",
    )


def root_text(task: SlashTask) -> str:
    """The thread's first message, in mrkdwn: who asked for what (Slack never shows
    the command itself). The task is escaped: it is quoted, not interpreted."""
    quoted = "\n".join(f"> {line}" for line in fallback_text(task.text).splitlines())
    return f"<@{task.user}> asked:\n{quoted}"


def as_inbound(task: SlashTask, root_ts: str) -> Inbound:
    """The task as the first message of the conversation under the posted root."""
    if task.in_dm:
        key, chat = dm_key(task.team, task.channel), ChatRef(task.channel)
    else:
        key = thread_key(task.team, task.channel, root_ts)
        chat = ChatRef(task.channel, root_ts)
    return Inbound(
        key=key,
        chat=chat,
        sender=Sender(task.user, task.user_name),
        event_id=task.delivery,
        text=task.text,
        message_id=root_ts,  # the working/done reaction goes on the root
        private_reply="" if task.in_dm else press_ref(task.channel, task.user, root_ts),
    )

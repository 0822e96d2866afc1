"""Slack payloads → `bridge.model.Inbound` (pure: no I/O, tested on JSON fixtures).

Conversation keys (docs/design.md, "Conversations"): a top-level `app_mention` starts the
thread `slack:<team>:<channel>:<ts>`; later messages in that thread belong to it
only when the bridge already owns the thread (`known_threads`), so chatter in
other threads is never seen; a DM is one conversation, `slack:<team>:<channel>`.

Slack delivers a mention in a thread twice (an `app_mention` and a `message`
event with different event ids): the `message` copy is dropped here. Shared files
(images, and any other file) are only listed (`SharedFile`); the bridge has the
adapter download them with the bot token once the message is admitted.
"""

from __future__ import annotations

import dataclasses
import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from adapters.malformed import ignore_malformed
from bridge.controls.table import COMMANDS
from bridge.model import ButtonPress, ChatRef, Inbound, MessageRef, Sender

if TYPE_CHECKING:
    from collections.abc import Container, Mapping

KEY_PREFIX = "slack:"  # what Slack's conversation keys start with
ACTION_PREFIX = "pi_bridge:"  # action_id prefix of the bridge's buttons
# "@bot stop" is a command; "@bot help me with X" is a prompt, so other control
# words count only when they are the whole message.
# Subtypes that are still a person (or bot) writing; joins, topic changes … are not.
_CONTENT_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "me_message", "bot_message"})
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|[^>]*)?>")


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the bot is in this workspace (from `auth.test`)."""

    team_id: str
    user_id: str
    bot_id: str = ""


@dataclass(frozen=True, slots=True)
class SharedFile:
    """A file shared in a message: an image, or (`kind` "file") any other file."""

    url: str
    mime_type: str
    size: int | None = None  # as Slack announced it
    kind: Literal["image", "file", "voice"] = "image"
    name: str = ""
    transcript: str = ""  # Slack's own transcript of an audio clip, when it has one


@dataclass(frozen=True, slots=True)
class Converted:
    inbound: Inbound
    shared_files: tuple[SharedFile, ...] = ()


def thread_key(team: str, channel: str, thread_ts: str) -> str:
    return f"{KEY_PREFIX}{team}:{channel}:{thread_ts}"


def is_dm(channel: str) -> bool:
    """Whether a channel id is a direct message's (DM channel ids start with D)."""
    return channel.startswith("D")


def dm_key(team: str, channel: str) -> str:
    return f"{KEY_PREFIX}{team}:{channel}"


def team_of(key: str) -> str:
    """The team of a key made by `thread_key` or `dm_key` ("" for another key)."""
    parts = key.split(":")
    return parts[1] if len(parts) > 2 and parts[0] == "slack" else ""


@ignore_malformed  # the runner asks this before converting: it must not raise either
def candidate_thread(body: Mapping[str, Any], me: Identity) -> str | None:
    """The thread key a `message` event would belong to, so a caller can check
    (e.g. in its store) whether the bridge owns that thread before converting."""
    event = body.get("event") or {}
    message = event.get("message") or event
    thread_ts, channel = message.get("thread_ts"), event.get("channel")
    if event.get("type") != "message" or not thread_ts or not channel:
        return None
    return thread_key(_team(body, me), channel, thread_ts)


@ignore_malformed
def from_event(
    body: Mapping[str, Any], me: Identity, known_threads: Container[str] = frozenset()
) -> Converted | None:
    """An Events API envelope body as an Inbound, or None when it is not for the bridge."""
    event = body.get("event") or {}
    kind = event.get("type")
    if kind == "app_mention":
        return _mention(body, event, me)
    if kind == "message":
        return _message(body, event, me, known_threads)
    return None


def _mention(body: Mapping[str, Any], event: Mapping[str, Any], me: Identity) -> Converted | None:
    channel, ts = event.get("channel"), event.get("ts")
    if not channel or not ts:
        return None
    # A mention inside any thread adopts that thread; at top level it starts one.
    root = event.get("thread_ts") or ts
    chat = ChatRef(channel, root)
    return _converted(body, event, me, thread_key(_team(body, me), channel, root), chat)


def _message(
    body: Mapping[str, Any],
    event: Mapping[str, Any],
    me: Identity,
    known_threads: Container[str],
) -> Converted | None:
    subtype = event.get("subtype")
    edited = subtype == "message_changed"
    message: Mapping[str, Any] = (event.get("message") or {}) if edited else event
    if not edited and subtype not in _CONTENT_SUBTYPES:
        return None
    channel = event.get("channel")
    if not channel:
        return None
    team = _team(body, me)
    if event.get("channel_type") == "im":
        # A DM is already private: answers there are plain messages.
        chat = ChatRef(channel)
        return _converted(body, message, me, dm_key(team, channel), chat, edited, private=False)
    thread_ts = message.get("thread_ts")
    if not thread_ts:
        return None
    key = thread_key(team, channel, thread_ts)
    if key not in known_threads:
        return None
    if me.user_id and f"<@{me.user_id}" in (message.get("text") or "") and not edited:
        return None  # the app_mention event carries this message
    return _converted(body, message, me, key, ChatRef(channel, thread_ts), edited)


def _converted(
    body: Mapping[str, Any],
    message: Mapping[str, Any],
    me: Identity,
    key: str,
    chat: ChatRef,
    edited: bool = False,
    *,
    private: bool = True,
) -> Converted:
    """`private`: answers meant for the sender alone go as ephemeral messages."""
    private = private and bool(message.get("user"))
    bot_id = message.get("bot_id") or ""
    user = message.get("user") or bot_id
    from_self = bool(user and user == me.user_id) or bool(bot_id and bot_id == me.bot_id)
    is_bot = bool(bot_id) or message.get("subtype") == "bot_message"
    if chat.thread_id is not None and user and not (is_bot or from_self):
        # Whom a stream in this thread is for, carried with the chat (ChatRef.reader).
        chat = dataclasses.replace(chat, reader=f"{team_of(key)}:{user}")
    inbound = Inbound(
        key=key,
        chat=chat,
        sender=Sender(user, _name(message), is_bot=is_bot),
        event_id=str(body.get("event_id") or ""),
        text=clean_text(message.get("text") or "", me.user_id),
        from_self=from_self,
        is_edit=edited,
        message_id=str(message.get("ts") or "") or None,
        private_reply=press_ref(chat.chat_id, user, chat.thread_id or "") if private else "",
    )
    return Converted(_typed(inbound), shared_files(message))


def _typed(inbound: Inbound) -> Inbound:
    """`inbound`, if the payload's ids were strings as Slack sends them. Otherwise the
    payload is malformed (a TypeError: None, logged): a list as a channel or user id
    would only fail later, in the store or the outbox."""
    press, chats = inbound.press, [inbound.chat]
    ids: list[object] = [inbound.sender.id]
    if press is not None and press.message is not None:
        chats.append(press.message.chat)
        ids.append(press.message.message_id)
    ids += [c.chat_id for c in chats] + [c.thread_id for c in chats if c.thread_id is not None]
    if not all(isinstance(i, str) for i in ids):
        raise TypeError(f"an id that is not a string: {ids!r}")
    return inbound


def _name(message: Mapping[str, Any]) -> str:
    profile = message.get("user_profile") or {}
    return str(profile.get("display_name") or profile.get("real_name") or "")


def _team(body: Mapping[str, Any], me: Identity) -> str:
    event = body.get("event") or {}
    return str(body.get("team_id") or event.get("team") or me.team_id)


def clean_text(text: str, bot_user_id: str) -> str:
    """Slack's message text as the user typed it: the leading bot mention dropped,
    links unwrapped, entities unescaped, and "@bot stop" turned into "!stop"."""
    mentioned = False
    if bot_user_id:
        pattern = rf"^\s*<@{re.escape(bot_user_id)}(?:\|[^>]*)?>[\s:,]*"
        text, mentioned = re.sub(pattern, "", text), re.match(pattern, text) is not None
    # Slack escapes only &, < and > in message text (api.slack.com "Formatting text").
    text = html.unescape(_LINK.sub(r"\1", text)).strip()
    words = text.split()
    # Only an addressed word is a command: a bare "new" may answer the agent's question.
    if mentioned and words and _is_command_word(words[0].lower(), len(words)):
        return "!" + text
    return text


def _is_command_word(word: str, count: int) -> bool:
    """A stop word anywhere in a line, a control command only on its own."""
    command = COMMANDS.find(word)
    if command is None:
        return False
    return command.action == "stop" or (count == 1 and command.action == "control")


def shared_files(message: Mapping[str, Any]) -> tuple[SharedFile, ...]:
    found = []
    for file in message.get("files") or ():
        mime = str(file.get("mimetype") or "")
        url = file.get("url_private_download") or file.get("url_private")
        size = file.get("size")
        if not url:
            continue
        kind: Literal["image", "file", "voice"] = "image" if mime.startswith("image/") else "file"
        if mime.startswith("audio/") or file.get("subtype") == "slack_audio":
            kind = "voice"
        name = str(file.get("name") or file.get("title") or "")
        sized = size if isinstance(size, int) else None
        mime = mime or "application/octet-stream"
        found.append(SharedFile(str(url), mime, sized, kind, name, _transcript(file)))
    return tuple(found)


def _transcript(file: Mapping[str, Any]) -> str:
    """Slack's transcript of an audio clip, when complete and whole."""
    transcription = file.get("transcription")
    if not isinstance(transcription, dict) or transcription.get("status") != "complete":
        return ""
    preview = transcription.get("preview")
    if not isinstance(preview, dict) or preview.get("has_more"):
        return ""
    content = preview.get("content")
    return content.strip() if isinstance(content, str) else ""


@ignore_malformed
def from_action(body: Mapping[str, Any], me: Identity) -> Converted | None:
    """A `block_actions` payload (a press on one of the bridge's buttons) as an Inbound."""
    actions = body.get("actions") or ()
    ours = (a for a in actions if str(a.get("action_id", "")).startswith(ACTION_PREFIX))
    action = next(ours, None)
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    user = body.get("user") or {}
    ts = message.get("ts") or container.get("message_ts")
    if action is None or not channel or not user.get("id") or not ts:
        return None
    team = (body.get("team") or {}).get("id") or me.team_id
    thread = message.get("thread_ts") or container.get("thread_ts")
    if is_dm(channel):
        key, chat = dm_key(team, channel), ChatRef(channel, thread)
    else:
        root = thread or ts
        key, chat = thread_key(team, channel, root), ChatRef(channel, root)
    press_id = press_ref(channel, user["id"], thread or "")
    press = ButtonPress(str(action.get("value") or ""), press_id, MessageRef(chat, ts))
    delivery = action.get("action_ts") or body.get("trigger_id") or ts
    sender = Sender(user["id"], str(user.get("username") or user.get("name") or ""))
    return Converted(_typed(Inbound(key, chat, sender, f"action:{delivery}", press=press)))


def press_ref(channel: str, user: str, thread_ts: str) -> str:
    """What `answer_press` needs to post an ephemeral answer to the presser."""
    return f"{channel}|{user}|{thread_ts}"


def parse_press_ref(press_id: str) -> tuple[str, str, str] | None:
    parts = press_id.split("|")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1], parts[2]

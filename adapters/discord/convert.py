"""Discord payloads → `bridge.model.Inbound` (pure: no I/O, no SDK; tested on JSON fixtures).

The runner hands in a message or an interaction as Discord's API v10 writes it
(docs.discord.com/developers/resources/message, interactions/receiving-and-responding),
and where it happened as a `Place` (a message names its channel, not what kind it is).

Conversations (docs/commands.md, "Discord"): a direct message is one conversation,
``discord:@me:<dm channel>``; in a server, a thread is one, ``discord:<guild>:<parent
channel>:<thread>`` (a thread of a text channel, or a forum post), so that
``[chats."discord:<guild>:<channel>"]`` covers a channel's threads. A mention of the
bot in a text channel opens a thread from that message (`Converted.opens_thread`; the
runner makes it, and `in_thread` moves the inbound there); a mention in a thread adopts
that thread; later messages in a thread belong to it only when the bridge already has
it (`known`), so chatter in other threads is never seen.

Where answers go (`ChatRef`): a text channel's thread is ``ChatRef(parent, thread)``,
posted to the thread; its first message, the mention, lives in the parent channel
and has the thread's id (a thread started from a message takes its id), which is how
the adapter finds where to react. A forum post's first message lives in the post:
``ChatRef(thread)``. A DM is ``ChatRef(channel)``.

Invariant: `event_id` is ``discord:<bot id>:m<message id>`` for a message and
``discord:<bot id>:i<interaction id>`` for an interaction, so a replayed event (the
gateway replays missed events after a RESUME) is dropped by the bridge's dedupe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from adapters.malformed import ignore_malformed
from bridge.controls.table import COMMANDS
from bridge.model import ButtonPress, ChatRef, Inbound, MessageRef, Sender

if TYPE_CHECKING:
    from collections.abc import Container, Mapping

KEY_PREFIX = "discord:"  # what Discord's conversation keys start with
DM_SCOPE = "@me"  # a DM's place in a key, as Discord's own links name it
BUTTON_PREFIX = "pi"  # custom_id of a button: pi<row><column>:<token>
FORM_PREFIX = "pif:"  # custom_id of a button's form (a modal): pif:<token>
ANSWER_ID = "answer"  # the modal's one text input
START_COMMAND = "pi"  # `/pi <task>`: starts a conversation, as a mention does
# Message flags and types (resources/message#message-object-message-flags, -types).
IS_VOICE_MESSAGE = 1 << 13
_CONTENT_TYPES = frozenset({0, 19})  # DEFAULT and REPLY: a person writing
# Interaction types (interactions/receiving-and-responding#interaction-object-interaction-type).
APPLICATION_COMMAND, MESSAGE_COMPONENT, MODAL_SUBMIT = 2, 3, 5
_BUTTON = re.compile(rf"^{BUTTON_PREFIX}[0-9][0-9]:(.+)$", re.DOTALL)
_SNOWFLAKE = re.compile(r"^[0-9]{1,20}$")

PlaceKind = Literal["dm", "text", "thread", "forum_post", "other"]


@dataclass(frozen=True, slots=True)
class Me:
    """The bot (its user id is its application's id)."""

    id: str


@dataclass(frozen=True, slots=True)
class Place:
    """Where a message or interaction happened, as the runner knows the channel:
    `channel_id` itself, its guild, and for a thread (`thread` or `forum_post`) the
    channel it belongs to."""

    channel_id: str
    kind: PlaceKind
    guild_id: str = ""
    parent_id: str = ""


@dataclass(frozen=True, slots=True)
class SharedFile:
    """A file a message carries, to fetch from its (signed) URL once admitted."""

    url: str
    mime_type: str
    size: int | None
    kind: Literal["image", "file", "voice"]
    name: str


@dataclass(frozen=True, slots=True)
class Converted:
    """A message for the bridge. `opens_thread`: a mention in a text channel; the
    runner opens a thread from it and moves the inbound there (`in_thread`).
    `adopts`: a thread the bridge did not have yet becomes a conversation (a mention
    in it, or one opened for it)."""

    inbound: Inbound
    files: tuple[SharedFile, ...] = ()
    opens_thread: bool = False
    adopts: bool = False


@dataclass(frozen=True, slots=True)
class Slash:
    """A slash command used: its name, the text given with it, who and where."""

    name: str
    text: str
    inbound: Inbound  # the command as a message (`/name text`), where it was used

    @property
    def line(self) -> str:
        return f"/{self.name} {self.text}".rstrip()


# --- keys and chats --------------------------------------------------------------------


def thread_key(guild: str, parent: str, thread: str) -> str:
    return f"{KEY_PREFIX}{guild}:{parent}:{thread}"


def dm_key(channel: str) -> str:
    return f"{KEY_PREFIX}{DM_SCOPE}:{channel}"


def is_dm(key: str) -> bool:
    return key.startswith(dm_key(""))


def conversation_key(place: Place) -> str:
    """The conversation a place is (a thread, a DM), or, for a channel, the key of
    the channel itself (where refusals to strangers are remembered)."""
    if place.kind == "dm":
        return dm_key(place.channel_id)
    if place.kind in ("thread", "forum_post"):
        return thread_key(place.guild_id, place.parent_id, place.channel_id)
    return f"{KEY_PREFIX}{place.guild_id or DM_SCOPE}:{place.channel_id}"


def chat_of(place: Place) -> ChatRef:
    if place.kind == "thread":
        return ChatRef(place.parent_id, place.channel_id)
    return ChatRef(place.channel_id)


def posted_in(chat: ChatRef) -> str:
    """The channel a chat's messages are posted to: its thread, if it has one."""
    return chat.thread_id or chat.chat_id


def reacted_in(chat: ChatRef, message_id: str) -> str:
    """The channel holding the person's message `message_id`: a text channel's thread
    was started from the message with the thread's id, which is in the parent."""
    return chat.chat_id if chat.thread_id == message_id else posted_in(chat)


def in_thread(converted: Converted, place: Place, thread_id: str) -> Converted:
    """A mention in a text channel, moved into the thread opened from it."""
    thread = Place(thread_id, "thread", place.guild_id, place.channel_id)
    inbound = replace(converted.inbound, key=conversation_key(thread), chat=chat_of(thread))
    return replace(converted, inbound=inbound, opens_thread=False, adopts=True)


# --- messages ----------------------------------------------------------------------------


@ignore_malformed
def from_message(
    message: Mapping[str, Any], place: Place, me: Me, known: Container[str] = frozenset()
) -> Converted | None:
    """A MESSAGE_CREATE as an inbound, or None when it is not for the bridge."""
    if int(message.get("type") or 0) not in _CONTENT_TYPES:
        return None  # joins, pins, "thread created" notices …
    author = message["author"]
    mentioned = _mentions_me(message, me)
    text = clean_text(str(message.get("content") or ""), me, mentioned=mentioned)
    files = shared_files(message)
    if not text and not files:
        return None  # stickers, or a guild message's text withheld (no content intent)
    key = conversation_key(place)
    opens = adopts = False
    if place.kind in ("thread", "forum_post"):
        if key not in known:
            if not mentioned:
                return None
            adopts = True
    elif place.kind == "text":
        if not mentioned:
            return None
        opens = True
    elif place.kind != "dm":
        return None
    who = sender(author, message.get("member"))
    reference = message.get("message_reference") or {}
    inbound = Inbound(
        key=key,
        chat=chat_of(place),
        sender=who,
        event_id=f"{KEY_PREFIX}{me.id}:m{message['id']}",
        text=text,
        reply_to=_id(reference.get("message_id")),
        message_id=str(message["id"]),
        from_self=who.id == me.id,
    )
    return Converted(inbound, files, opens_thread=opens, adopts=adopts)


def sender(user: Mapping[str, Any], member: Mapping[str, Any] | None = None) -> Sender:
    """Who wrote or pressed: the user, and (in a server) the ids of their roles."""
    roles = frozenset(str(r) for r in (member or {}).get("roles") or ())
    name = str(user.get("global_name") or user.get("username") or "")
    return Sender(str(user["id"]), name, is_bot=bool(user.get("bot")), groups=roles)


def _mentions_me(message: Mapping[str, Any], me: Me) -> bool:
    listed = any(str(user.get("id")) == me.id for user in message.get("mentions") or ())
    return listed or bool(_mention_of(me).search(str(message.get("content") or "")))


def _mention_of(me: Me) -> re.Pattern[str]:
    """The bot's mention, and what only addresses it after (a comma, a colon, spaces)."""
    return re.compile(rf"<@!?{re.escape(me.id)}>[,:]?[ \t]*")


def clean_text(text: str, me: Me, *, mentioned: bool = False) -> str:
    """The text as the person meant it: the bot's mentions dropped, and "@bot stop"
    made "/stop" (a stop word anywhere, another bridge command only as the whole
    message, so "@bot new tests for the parser" stays a prompt)."""
    text = _mention_of(me).sub("", text).strip(" \t\n:,")
    words = text.split()
    if mentioned and words and _is_command_word(words[0].lower(), len(words)):
        return "/" + text
    return text


def _is_command_word(word: str, count: int) -> bool:
    command = COMMANDS.find(word)
    if command is None:
        return False
    return command.action == "stop" or (count == 1 and command.action == "control")


def shared_files(message: Mapping[str, Any]) -> tuple[SharedFile, ...]:
    """A message's attachments: images, voice messages (and other audio, transcribed
    as Telegram's voice notes are), and any other file."""
    voice_message = bool(int(message.get("flags") or 0) & IS_VOICE_MESSAGE)
    found = []
    for attachment in message.get("attachments") or ():
        url = attachment.get("url") or attachment.get("proxy_url")
        if not url:
            continue
        mime = str(attachment.get("content_type") or "application/octet-stream")
        kind: Literal["image", "file", "voice"] = "file"
        if mime.startswith("image/"):
            kind = "image"
        elif voice_message or mime.startswith("audio/"):
            kind = "voice"
        size = attachment.get("size")
        sized = size if isinstance(size, int) and size >= 0 else None
        name = str(attachment.get("filename") or "")
        found.append(SharedFile(str(url), mime.split(";")[0].strip(), sized, kind, name))
    return tuple(found)


def _id(value: object) -> str | None:
    return None if value is None else str(value)


# --- interactions ------------------------------------------------------------------------


def press_ref(application_id: str, token: str) -> str:
    """What `answer_press` needs to answer an interaction privately later: its
    webhook (the application and the interaction's token, valid for 15 minutes)."""
    return f"{application_id}/{token}"


def parse_press_ref(press_id: str) -> tuple[str, str] | None:
    application, _, token = press_id.partition("/")
    if not _SNOWFLAKE.match(application) or not token:
        return None
    return application, token


def button_id(row: int, column: int, token: str) -> str:
    """A button's custom_id: its place (unique in the message, as Discord requires)
    and the bridge's opaque token."""
    return f"{BUTTON_PREFIX}{row}{column}:{token}"


def token_of(custom_id: str) -> str | None:
    """The bridge's token in one of its buttons' custom_id (None: not one of ours)."""
    found = _BUTTON.match(custom_id)
    return found[1] if found else None


def form_id(token: str) -> str:
    return FORM_PREFIX + token


@ignore_malformed
def from_press(interaction: Mapping[str, Any], place: Place, me: Me) -> Inbound | None:
    """A press on one of the bridge's buttons (a MESSAGE_COMPONENT interaction)."""
    if int(interaction["type"]) != MESSAGE_COMPONENT:
        return None
    token = token_of(str((interaction.get("data") or {}).get("custom_id") or ""))
    if token is None:
        return None
    return _pressed(interaction, place, me, token, None)


@ignore_malformed
def from_submission(interaction: Mapping[str, Any], place: Place, me: Me) -> Inbound | None:
    """A button's form submitted (a MODAL_SUBMIT interaction): the press, with the text."""
    if int(interaction["type"]) != MODAL_SUBMIT:
        return None
    data = interaction.get("data") or {}
    custom_id = str(data.get("custom_id") or "")
    if not custom_id.startswith(FORM_PREFIX) or len(custom_id) == len(FORM_PREFIX):
        return None
    text = _submitted(data.get("components") or ())
    return _pressed(interaction, place, me, custom_id.removeprefix(FORM_PREFIX), text)


def _submitted(components: Any) -> str:
    """The answer's value in a submission: in an action row, or in a label."""
    for component in components:
        inner = [*(component.get("components") or ()), component.get("component") or {}]
        for field in inner:
            if field.get("custom_id") == ANSWER_ID:
                return str(field.get("value") or "")
    return ""


def _pressed(
    interaction: Mapping[str, Any], place: Place, me: Me, token: str, text: str | None
) -> Inbound:
    chat = chat_of(place)
    message = interaction.get("message") or {}
    ref = MessageRef(chat, str(message["id"])) if message.get("id") else None
    press = ButtonPress(token, _press_id(interaction, me), ref, text=text)
    who = _interacting(interaction)
    return Inbound(
        conversation_key(place), chat, who, _interaction_event(interaction, me), press=press
    )


@ignore_malformed
def from_command(interaction: Mapping[str, Any], place: Place, me: Me) -> Slash | None:
    """A slash command (an APPLICATION_COMMAND interaction) and the text given with it."""
    if int(interaction["type"]) != APPLICATION_COMMAND:
        return None
    data = interaction.get("data") or {}
    name = str(data["name"])
    given = [str(o.get("value") or "") for o in data.get("options") or () if "value" in o]
    text = " ".join(v for v in given if v).strip()
    line = text if name == START_COMMAND else f"/{name} {text}".rstrip()
    inbound = Inbound(
        key=conversation_key(place),
        chat=chat_of(place),
        sender=_interacting(interaction),
        event_id=_interaction_event(interaction, me),
        text=line,
        private_reply=_press_id(interaction, me),
    )
    return Slash(name, text, inbound)


def _interacting(interaction: Mapping[str, Any]) -> Sender:
    member = interaction.get("member")
    user = (member or {}).get("user") or interaction["user"]
    return sender(user, member)


def _press_id(interaction: Mapping[str, Any], me: Me) -> str:
    application = str(interaction.get("application_id") or me.id)
    return press_ref(application, str(interaction["token"]))


def _interaction_event(interaction: Mapping[str, Any], me: Me) -> str:
    return f"{KEY_PREFIX}{me.id}:i{interaction['id']}"

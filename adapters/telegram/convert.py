"""Telegram updates (Bot API JSON) → `bridge.model.Inbound`. Pure: no I/O, no SDK.

Conversation keys (docs/design.md): ``tg:<chat_id>`` for private chats and groups,
``tg:<chat_id>:<message_thread_id>`` for forum topics. In groups, with the
"mention" trigger, only messages that mention the bot, reply to it, or are
commands are taken. ``/cmd@botname`` stays as text: the bridge router normalizes
it against the bot's name. ``/start`` (Telegram sends it when a user opens the bot)
becomes ``/help``, so the first thing a user sees is what the bridge understands.
Group and supergroup chats are marked `ChatRef.is_group` (they are paced more
strictly). A photo is not fetched here: the result names the largest size's
`file_id` and the caller downloads it.

Invariant: `event_id` is ``tg:<bot id>:<update_id>``, so a redelivered update is dropped
by the bridge's dedupe whatever its content, and another bot's update of the same id
in the same store is not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from adapters.malformed import ignore_malformed
from bridge.model import ButtonPress, ChatRef, Inbound, MessageRef, Sender

if TYPE_CHECKING:
    from adapters.telegram.settings import GroupTrigger

Json = Mapping[str, Any]

KEY_PREFIX = "tg:"  # what Telegram's conversation keys start with
PHOTO_MIME = "image/jpeg"  # Telegram re-encodes every photo size as JPEG
# Telegram sends "/start" (with a deep-link payload, if any) when a user opens the bot:
# a greeting, not a prompt for the agent. It becomes "/help", answered by the bridge.
_START = re.compile(r"^/start(@\w+)?(?:\s.*)?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Me:
    """What the conversion needs to know about the bot itself (from getMe)."""

    id: int
    username: str
    group_trigger: GroupTrigger = "mention"


@dataclass(frozen=True, slots=True)
class Incoming:
    """An update taken for the bridge; `file_id` is a file still to download, of
    `file_size` bytes as Telegram announced it (None: not said): an image, or (`kind`
    "file") a document, audio, video or voice note, named `file_name`."""

    inbound: Inbound
    file_id: str | None = None
    mime_type: str = PHOTO_MIME
    file_size: int | None = None
    kind: Literal["image", "file", "voice"] = "image"
    file_name: str = ""


@ignore_malformed
def convert(update: Json, me: Me) -> Incoming | None:
    """The bridge's view of one update, or None when it is not for the bridge."""
    # Update ids count per bot: two bots sharing one store would drop each other's.
    event_id = f"tg:{me.id}:{update['update_id']}"
    if (query := update.get("callback_query")) is not None:
        return _press(query, event_id, me)
    for field, is_edit in (("message", False), ("edited_message", True)):
        if (message := update.get(field)) is not None:
            return _message(message, event_id, me, is_edit=is_edit)
    return None  # channel posts, member updates, polls …: not conversations


def chat_ref(message: Json) -> ChatRef:
    """Where answers to `message` go: its chat, and its forum topic if it has one.
    Groups are marked: Telegram paces them more strictly than private chats."""
    chat_id, group = str(message["chat"]["id"]), _is_group(message)
    if message.get("is_topic_message") and "message_thread_id" in message:
        return ChatRef(chat_id, str(message["message_thread_id"]), is_group=group)
    return ChatRef(chat_id, is_group=group)


def conversation_key(chat: ChatRef) -> str:
    where = chat.chat_id if chat.thread_id is None else f"{chat.chat_id}:{chat.thread_id}"
    return f"{KEY_PREFIX}{where}"


def sender(user: Json | None) -> Sender:
    if user is None:  # anonymous group admins and channels post without `from`
        return Sender("", "anonymous")
    name = " ".join(p for p in (user.get("first_name"), user.get("last_name")) if p)
    return Sender(str(user["id"]), name or user.get("username", ""), bool(user.get("is_bot")))


def _press(query: Json, event_id: str, me: Me) -> Incoming | None:
    message = query.get("message")
    if message is None or "chat" not in message:
        return None  # a press on an inline-mode message: the bridge never sends those
    chat = chat_ref(message)
    ref = MessageRef(chat, str(message["message_id"]))
    # callback_data is a string (Bot API); any other JSON would reach the store as a key.
    press = ButtonPress(str(query.get("data") or ""), press_id=str(query["id"]), message=ref)
    who = sender(query.get("from"))
    inbound = Inbound(
        conversation_key(chat), chat, who, event_id, press=press, from_self=_is_me(who, me)
    )
    return Incoming(inbound)


def _message(message: Json, event_id: str, me: Me, *, is_edit: bool) -> Incoming | None:
    text = message.get("text") or message.get("caption") or ""
    entities = message.get("entities") or message.get("caption_entities") or ()
    if _is_group(message) and me.group_trigger == "mention":
        if not _addressed(message, text, entities, me):
            return None
        text = _without_mention(text, me)
    text = _START.sub(r"/help\1", text)
    file_id, mime, size = _image(message)
    kind: Literal["image", "file", "voice"] = "image"
    name = ""
    if file_id is None:
        file_id, mime, size, name = _file(message)
        kind = "voice" if "voice" in message or "audio" in message else "file"
    if not text and file_id is None:
        return None  # stickers, joins …: nothing the agent can read
    chat = chat_ref(message)
    who = sender(message.get("from"))
    replied = message.get("reply_to_message")
    # In a forum every message "replies" to the topic's opening message: not a reply.
    if replied is not None and replied.get("message_id") == message.get("message_thread_id"):
        replied = None
    inbound = Inbound(
        key=conversation_key(chat),
        chat=chat,
        sender=who,
        event_id=event_id,
        text=text,
        reply_to=str(replied["message_id"]) if replied is not None else None,
        message_id=str(message["message_id"]),
        from_self=_is_me(who, me),
        is_edit=is_edit,
    )
    return Incoming(inbound, file_id, mime, size, kind, name)


def _is_group(message: Json) -> bool:
    return message["chat"].get("type") in ("group", "supergroup")


def _is_me(who: Sender, me: Me) -> bool:
    return who.is_bot and who.id == str(me.id)


def _addressed(message: Json, text: str, entities: Any, me: Me) -> bool:
    """A mention of the bot, a reply to the bot, or a command (for us or for everyone)."""
    replied = message.get("reply_to_message")
    if replied is not None and (replied.get("from") or {}).get("id") == me.id:
        return bool(replied.get("message_id") != message.get("message_thread_id"))
    for entity in entities:
        piece = _utf16_slice(text, entity["offset"], entity["length"])
        if entity["type"] == "mention" and piece[1:].lower() == me.username.lower():
            return True
        if entity["type"] == "text_mention" and (entity.get("user") or {}).get("id") == me.id:
            return True
        if entity["type"] == "bot_command" and entity["offset"] == 0:
            target = piece.partition("@")[2]
            return not target or target.lower() == me.username.lower()
    return False


def _without_mention(text: str, me: Me) -> str:
    """The text without "@bot" where it only addresses the bot (not in "/cmd@bot")."""
    if not me.username:
        return text
    pattern = re.compile(rf"(?<![\w/])@{re.escape(me.username)}\b[,:]?[ \t]*", re.IGNORECASE)
    return pattern.sub("", text).strip()


def _image(message: Json) -> tuple[str | None, str, int | None]:
    sizes = message.get("photo") or ()
    if sizes:
        largest = max(sizes, key=_area)
        return largest["file_id"], PHOTO_MIME, _size(largest)
    document = message.get("document") or {}
    mime = str(document.get("mime_type", ""))
    if mime.startswith("image/"):  # a photo sent "as file" keeps its quality
        return document["file_id"], mime, _size(document)
    return None, PHOTO_MIME, None


# Files a person may send, by message field; the fallback name when they carry none.
_FILES = {
    "document": "document",
    "audio": "audio",
    "video": "video.mp4",
    "voice": "voice.ogg",
    "video_note": "video-note.mp4",
    "animation": "animation.mp4",
}


def _file(message: Json) -> tuple[str | None, str, int | None, str]:
    """A file that is not an image: (file_id, MIME type, size, name as sent)."""
    for field_name, fallback in _FILES.items():
        file = message.get(field_name)
        if isinstance(file, dict) and file.get("file_id"):
            mime = str(file.get("mime_type") or "application/octet-stream")
            name = str(file.get("file_name") or fallback)
            return str(file["file_id"]), mime, _size(file), name
    return None, "application/octet-stream", None, ""


def _size(file: Json) -> int | None:
    size = file.get("file_size")
    return size if isinstance(size, int) and size >= 0 else None


def _utf16_slice(text: str, offset: int, length: int) -> str:
    """Entity offsets count UTF-16 code units (Bot API), not Python characters."""
    units = text.encode("utf-16-le")
    return units[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="replace")


def _area(size: Json) -> tuple[int, int]:
    width, height = _integer(size.get("width", 0)), _integer(size.get("height", 0))
    return width * height, _integer(size.get("file_size", 0))


def _integer(value: Any) -> int:
    """A Bot API Integer: infinity (JSON's 1e400) is as malformed as a word."""
    try:
        return int(value)
    except OverflowError as exc:
        raise ValueError(f"not an integer: {value!r}") from exc

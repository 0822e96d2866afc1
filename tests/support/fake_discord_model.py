"""What the fake Discord keeps (users, the guild, channels, messages, interactions, modals)
and how each is written on the wire, as Discord's API v10 documents the objects
(docs.discord.com/developers/resources/{user,guild,channel,message} and
/interactions/receiving-and-responding).

Ids are real snowflakes (milliseconds since the Discord epoch in the top bits), so
discord.py's `created_at` and its delete sub-limits read them as Discord's. The world is
one guild with two text channels, a forum, two roles and three members; DMs are made on
demand. A message's `json()` is what the bot is shown: `redact=True` empties the fields
the message-content intent guards (content, embeds, attachments, components).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

Json = dict[str, Any]

DISCORD_EPOCH_MS = 1_420_070_400_000
TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.fake.discord-bot-token"
ANSWER_WITHIN = 3.0  # s to answer an interaction ("within 3 seconds", receiving-and-responding)
TOKEN_LIFE = 15 * 60.0  # s an interaction token takes followups ("valid for 15 minutes")
UPLOAD_LIMIT = 10 * 2**20  # bytes per file without boosts (reference#uploading-files)

# Message flags (resources/message#message-object-message-flags).
EPHEMERAL = 1 << 6
LOADING = 1 << 7
SUPPRESS_NOTIFICATIONS = 1 << 12  # "@silent": nobody is notified, mentions still show
IS_VOICE_MESSAGE = 1 << 13
# Channel types (resources/channel#channel-object-channel-types).
GUILD_TEXT, DM, PUBLIC_THREAD, PRIVATE_THREAD, GUILD_FORUM = 0, 1, 11, 12, 15
THREAD_TYPES = frozenset({PUBLIC_THREAD, PRIVATE_THREAD})
# Component types (components/reference#component-object-component-types).
ACTION_ROW, BUTTON, TEXT_INPUT, LABEL = 1, 2, 4, 18
# Interaction types (interactions/receiving-and-responding#interaction-object-interaction-type).
APPLICATION_COMMAND, MESSAGE_COMPONENT, MODAL_SUBMIT = 2, 3, 5
# Permission bits (topics/permissions).
_MEMBER_PERMISSIONS = (
    (1 << 6)  # ADD_REACTIONS
    | (1 << 10)  # VIEW_CHANNEL
    | (1 << 11)  # SEND_MESSAGES
    | (1 << 14)  # EMBED_LINKS
    | (1 << 15)  # ATTACH_FILES
    | (1 << 16)  # READ_MESSAGE_HISTORY
    | (1 << 31)  # USE_APPLICATION_COMMANDS
    | (1 << 35)  # CREATE_PUBLIC_THREADS
    | (1 << 38)  # SEND_MESSAGES_IN_THREADS
)
_BOT_PERMISSIONS = _MEMBER_PERMISSIONS | (1 << 34)  # MANAGE_THREADS (not MANAGE_MESSAGES)


def _snowflake_at(ms: int, serial: int) -> int:
    return ((ms - DISCORD_EPOCH_MS) << 22) | (serial & 0xFFF)


_fixed_ids = itertools.count(1)


def _fixed(offset_ms: int) -> int:
    """A stable id for the world's fixtures: a snowflake from 2023 plus a serial."""
    return _snowflake_at(1_680_000_000_000 + offset_ms, next(_fixed_ids))


class Snowflakes:
    """Fresh ids, strictly increasing, from the wall clock (as Discord makes them)."""

    def __init__(self) -> None:
        self._last = 0

    def __call__(self) -> int:
        candidate = _snowflake_at(int(time.time() * 1000), 0)
        self._last = max(candidate, self._last + 1)
        return self._last


def iso(moment: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if moment is None else moment, UTC).isoformat()


@dataclass(frozen=True)
class User:
    id: int
    username: str
    global_name: str | None = None
    bot: bool = False

    def json(self) -> Json:
        out: Json = {
            "id": str(self.id),
            "username": self.username,
            "global_name": self.global_name,
            "discriminator": "0",
            "avatar": None,
            "public_flags": 0,
        }
        if self.bot:
            out["bot"] = True
        return out


BOT = User(_fixed(0), "pi", "Pi", bot=True)
APP_ID = BOT.id  # a bot's application id is its user id
ALICE = User(_fixed(1), "alice", "Alice")
BOB = User(_fixed(2), "bob", "Bob")
GUILD_ID = _fixed(3)
ROLE_PI_USERS = _fixed(4)
ROLE_BOT = _fixed(5)  # the bot's managed role
GENERAL = _fixed(6)
RANDOM = _fixed(7)
FORUM = _fixed(8)
FORUM_TAGS = ({"id": str(_fixed(9)), "name": "question"}, {"id": str(_fixed(10)), "name": "bug"})
JOINED = iso(1_680_000_000)


@dataclass(frozen=True)
class Role:
    id: int
    name: str
    permissions: int
    position: int
    managed: bool = False

    def json(self) -> Json:
        out: Json = {
            "id": str(self.id),
            "name": self.name,
            "color": 0,
            "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
            "hoist": False,
            "icon": None,
            "unicode_emoji": None,
            "position": self.position,
            "permissions": str(self.permissions),
            "managed": self.managed,
            "mentionable": False,
            "flags": 0,
            "tags": {},
        }
        if self.managed:
            out["tags"] = {"bot_id": str(BOT.id)}
        return out


ROLES = (
    Role(GUILD_ID, "@everyone", _MEMBER_PERMISSIONS, 0),
    Role(ROLE_PI_USERS, "pi-users", _MEMBER_PERMISSIONS, 1),
    Role(ROLE_BOT, "Pi", _BOT_PERMISSIONS, 2, managed=True),
)
MEMBER_ROLES: dict[int, tuple[int, ...]] = {
    BOT.id: (ROLE_BOT,),
    ALICE.id: (ROLE_PI_USERS,),
    BOB.id: (),
}
USERS = {u.id: u for u in (BOT, ALICE, BOB)}


def permissions_of(user: User) -> int:
    roles = {GUILD_ID, *MEMBER_ROLES.get(user.id, ())}
    total = 0
    for role in ROLES:
        if role.id in roles:
            total |= role.permissions
    return total


def member_json(user: User, *, with_user: bool = True, permissions: bool = False) -> Json:
    out: Json = {
        "roles": [str(r) for r in MEMBER_ROLES.get(user.id, ())],
        "joined_at": JOINED,
        "nick": None,
        "avatar": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "premium_since": None,
    }
    if with_user:
        out["user"] = user.json()
    if permissions:
        out["permissions"] = str(permissions_of(user))
    return out


@dataclass
class Channel:
    id: int
    type: int
    name: str = ""
    guild_id: int | None = GUILD_ID
    parent_id: int | None = None
    owner_id: int | None = None
    recipient: User | None = None  # a DM's other side
    position: int = 0
    message_count: int = 0
    last_message_id: int | None = None
    applied_tags: list[str] = field(default_factory=list)
    created: float = field(default_factory=time.time)

    @property
    def is_thread(self) -> bool:
        return self.type in THREAD_TYPES

    def json(self) -> Json:
        last = str(self.last_message_id) if self.last_message_id else None
        if self.type == DM:
            assert self.recipient is not None
            return {
                "id": str(self.id),
                "type": DM,
                "last_message_id": last,
                "flags": 0,
                "recipients": [self.recipient.json()],
            }
        out: Json = {
            "id": str(self.id),
            "type": self.type,
            "guild_id": str(self.guild_id),
            "name": self.name,
            "parent_id": str(self.parent_id) if self.parent_id else None,
            "last_message_id": last,
            "rate_limit_per_user": 0,
            "flags": 0,
            "nsfw": False,
        }
        if self.is_thread:
            out |= self._thread_fields()
        else:
            out |= {"position": self.position, "permission_overwrites": [], "topic": None}
        if self.type == GUILD_FORUM:
            out |= {
                "available_tags": [
                    {**t, "moderated": False, "emoji_id": None, "emoji_name": None}
                    for t in FORUM_TAGS
                ],
                "default_reaction_emoji": None,
                "default_thread_rate_limit_per_user": 0,
                "default_sort_order": None,
                "default_forum_layout": 0,
            }
        return out

    def _thread_fields(self) -> Json:
        return {
            "owner_id": str(self.owner_id),
            "message_count": self.message_count,
            "total_message_sent": self.message_count,
            "member_count": 1,
            "applied_tags": list(self.applied_tags),
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": iso(self.created),
                "locked": False,
                "create_timestamp": iso(self.created),
            },
        }


def world_channels() -> list[Channel]:
    return [
        Channel(GENERAL, GUILD_TEXT, "general", position=0),
        Channel(RANDOM, GUILD_TEXT, "random", position=1),
        Channel(FORUM, GUILD_FORUM, "forum", position=2),
    ]


def guild_json(channels: list[Channel], *, members: bool, member_count: int) -> Json:
    """The guild as GUILD_CREATE carries it (events/gateway-events#guild-create): every
    member with the members intent, only the bot's own without it."""
    shown = list(USERS.values()) if members else [BOT]
    return {
        "id": str(GUILD_ID),
        "name": "Team",
        "icon": None,
        "splash": None,
        "discovery_splash": None,
        "owner_id": str(ALICE.id),
        "afk_channel_id": None,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [r.json() for r in ROLES],
        "emojis": [],
        "stickers": [],
        "features": [],
        "mfa_level": 0,
        "system_channel_id": None,
        "system_channel_flags": 0,
        "rules_channel_id": None,
        "preferred_locale": "en-US",
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "nsfw_level": 0,
        "joined_at": JOINED,
        "large": False,
        "unavailable": False,
        "member_count": member_count,
        "members": [member_json(u) for u in shown],
        "channels": [c.json() for c in channels if not c.is_thread and c.guild_id],
        "threads": [c.json() for c in channels if c.is_thread],
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    }


@dataclass
class Attachment:
    id: int
    filename: str
    data: bytes
    content_type: str
    url: str = ""
    duration: float | None = None  # voice messages: duration_secs
    waveform: str | None = None  # voice messages: base64 of the amplitude samples
    description: str | None = None

    def json(self) -> Json:
        out: Json = {
            "id": str(self.id),
            "filename": self.filename,
            "size": len(self.data),
            "url": self.url,
            "proxy_url": self.url,
            "content_type": self.content_type,
            "flags": 0,
        }
        if self.description:
            out["description"] = self.description
        if self.duration is not None:
            out["duration_secs"] = self.duration
        if self.waveform is not None:
            out["waveform"] = self.waveform
        return out


@dataclass
class Message:
    id: int
    channel_id: int
    author: User
    content: str = ""
    components: list[Json] = field(default_factory=list)
    embeds: list[Json] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    flags: int = 0
    guild_id: int | None = None
    reference_id: int | None = None  # the message it replies to
    mentions: list[User] = field(default_factory=list)
    ephemeral: bool = False
    interaction_id: int | None = None  # set on an interaction's answer or followup
    thread_id: int | None = None  # a thread started from it
    deleted: bool = False
    edited_at: list[float] = field(default_factory=list)  # the fake's clock at each edit
    edited: float | None = None  # wall-clock time of the last edit (edited_timestamp)
    at: float = 0.0  # the fake's clock when it was created
    reactions: list[str] = field(default_factory=list)  # the bot's
    pinged: list[int] = field(default_factory=list)  # users its creation notified (`pinged`)

    @property
    def silent(self) -> bool:
        return bool(self.flags & SUPPRESS_NOTIFICATIONS)

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """(label, custom_id) of every button, in order (rows, then containers)."""
        buttons = [c for c in walk(self.components) if c.get("type") == BUTTON]
        return [(b.get("label", ""), b.get("custom_id", "")) for b in buttons]

    @property
    def from_bot(self) -> bool:
        return self.author.id == BOT.id

    def json(self, *, redact: bool = False, reference: Message | None = None) -> Json:
        out: Json = {
            "id": str(self.id),
            "channel_id": str(self.channel_id),
            "type": 19 if self.reference_id else 0,
            "author": self.author.json(),
            "content": "" if redact else self.content,
            "timestamp": iso(_unix(self.id)),
            "edited_timestamp": iso(self.edited) if self.edited else None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [u.json() for u in self.mentions],
            "mention_roles": [],
            "attachments": [] if redact else [a.json() for a in self.attachments],
            "embeds": [] if redact else list(self.embeds),
            "components": [] if redact else list(self.components),
            "pinned": False,
            "flags": self.flags,
        }
        if self.guild_id is not None:
            out["guild_id"] = str(self.guild_id)
            if not self.author.bot:
                out["member"] = member_json(self.author, with_user=False)
        if self.reference_id:
            out["message_reference"] = {
                "type": 0,
                "message_id": str(self.reference_id),
                "channel_id": str(self.channel_id),
                **({"guild_id": str(self.guild_id)} if self.guild_id else {}),
            }
            out["referenced_message"] = reference.json(redact=redact) if reference else None
        if self.interaction_id is not None:
            out["webhook_id"] = str(APP_ID)
            out["application_id"] = str(APP_ID)
        if self.reactions:
            out["reactions"] = [_reaction_json(e) for e in self.reactions]
        return out


def _reaction_json(emoji: str) -> Json:
    name, _, emoji_id = emoji.partition(":")
    return {
        "count": 1,
        "count_details": {"burst": 0, "normal": 1},
        "me": True,
        "me_burst": False,
        "burst_colors": [],
        "emoji": {"id": emoji_id or None, "name": name},
    }


def _unix(snowflake: int) -> float:
    return ((snowflake >> 22) + DISCORD_EPOCH_MS) / 1000


def walk(components: list[Json]) -> Iterator[Json]:
    """Every component, depth first (action rows, labels, containers, sections)."""
    for component in components:
        yield component
        yield from walk(list(component.get("components") or []))
        inner = component.get("component") or component.get("accessory")
        if isinstance(inner, dict):
            yield from walk([inner])


@dataclass
class Field:
    """A text input of a modal, as the user sees it."""

    custom_id: str
    label: str
    required: bool = True
    max_length: int = 4000
    min_length: int = 0
    value: str = ""  # its prefilled value


@dataclass
class Modal:
    interaction_id: int  # the interaction answered with it
    user: User
    custom_id: str
    title: str
    components: list[Json]
    fields: list[Field]
    at: float
    submitted: bool = False


@dataclass
class Interaction:
    id: int
    token: str
    type: int
    channel_id: int
    user: User
    data: Json
    at: float  # the fake's clock when it was dispatched
    clock: Callable[[], float] = field(repr=False, default=time.monotonic)
    guild_id: int | None = None
    message_id: int | None = None  # the message whose component was used
    response_type: int | None = None  # the callback type it was answered with
    response: Json | None = None  # the callback's body
    answered_at: float | None = None
    late: bool = False  # an answer came after the deadline (and was refused)
    original_id: int | None = None  # the message @original names
    followup_ids: list[int] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.response_type is not None

    @property
    def failed(self) -> bool:
        """What Discord shows as "This interaction failed": no answer within 3 s."""
        if self.answered_at is not None:
            return self.answered_at - self.at > ANSWER_WITHIN
        return self.late or self.clock() - self.at > ANSWER_WITHIN


@dataclass(frozen=True)
class Typing:
    channel_id: int
    at: float


@dataclass
class Call:
    method: str
    path: str  # after /api/v10, percent-decoded
    query: dict[str, str]
    json: Any  # the JSON body, or a multipart request's payload_json
    body: bytes
    files: list[tuple[str, bytes]]
    at: float  # the fake's clock when it arrived
    status: int = 0  # the answer's HTTP status

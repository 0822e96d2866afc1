"""The fake Discord's state and the operations its REST routes and test helpers share:
finding channels and messages (404 with Discord's codes when unknown), storing a new or
edited message after the form checks, and telling the gateway about it.

A message event is shown to a session as Discord shows it to a bot: guild messages need
the guild-messages intent, DMs the direct-messages intent; content, embeds, attachments
and components are empty without the message-content intent unless the message is in a
DM, mentions the bot or is the bot's own (events/gateway#message-content-intent).
Ephemeral messages are not dispatched at all.

Files live on the fake at `/attachments/<channel>/<id>/<name>`, signed as Discord's CDN
signs them (`ex` expiry, `is` issue time, `hm` signature, as hex): a URL without a valid
signature, or past its expiry, is answered 404 like an expired Discord attachment link.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tests.support.fake_discord_checks import ApiError, check_message
from tests.support.fake_discord_gateway import (
    DIRECT_MESSAGES,
    GUILD_MESSAGES,
    GUILDS,
    MESSAGE_CONTENT,
    Gateway,
    Session,
)
from tests.support.fake_discord_model import (
    BOT,
    DM,
    EPHEMERAL,
    Attachment,
    Call,
    Channel,
    Interaction,
    Message,
    Modal,
    Snowflakes,
    Typing,
    User,
)
from tests.support.loopback import until

if TYPE_CHECKING:
    from collections.abc import Callable

Json = dict[str, Any]
WAIT = 60.0  # s a helper waits for the bot by default: generous, a loaded 2-core CI machine
LINK_LIFE = 24 * 3600  # s an attachment URL stays valid (the fake's figure)
_SIGNING_KEY = b"fake-discord-cdn"


class Store:
    """State and shared operations; the REST mixins and FakeDiscord build on it."""

    gateway: Gateway
    clock: Callable[[], float]
    upload_limit: int
    channels: dict[int, Channel]

    def _init_store(self) -> None:
        self.snowflake = Snowflakes()
        self.calls: list[Call] = []
        self.limited: list[Call] = []
        self.all_messages: dict[int, Message] = {}
        self.interactions: dict[int, Interaction] = {}
        self.modals: list[Modal] = []
        self.typing: list[Typing] = []
        self.reactions: dict[int, list[str]] = {}
        self.commands: dict[int | None, list[Json]] = {}
        self.downloads: list[str] = []
        self.dms: dict[int, int] = {}  # user id → DM channel id
        self.files: dict[int, Attachment] = {}  # attachment id → file (the CDN)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- lookups ---------------------------------------------------------------------

    def channel(self, channel_id: int | str) -> Channel:
        found = self.channels.get(int(channel_id))
        if found is None:
            raise ApiError(404, 10003, "Unknown Channel")
        return found

    def message_in(self, channel_id: int | str, message_id: int | str) -> Message:
        found = self.all_messages.get(int(message_id))
        if found is None or found.deleted or found.channel_id != int(channel_id):
            raise ApiError(404, 10008, "Unknown Message")
        return found

    def dm_channel(self, user: User) -> int:
        """The DM channel between the bot and `user` (made on first use)."""
        if user.id not in self.dms:
            channel = Channel(self.snowflake(), DM, guild_id=None, recipient=user)
            self.channels[channel.id] = channel
            self.dms[user.id] = channel.id
        return self.dms[user.id]

    async def connected(self, within: float = WAIT) -> None:
        """Until a gateway session has IDENTIFYed (or RESUMEd) and is connected."""
        await until(self.gateway.ready, within)

    # --- messages ----------------------------------------------------------------------

    def new_message(
        self,
        channel: Channel,
        author: User,
        payload: Json,
        files: list[tuple[str, bytes]] | None = None,
        *,
        check: bool = True,
        message_id: int | None = None,
    ) -> Message:
        """A message from `payload` (Discord's create-message body) stored in `channel`."""
        files = files or []
        if check:
            check_message(payload, files, self.upload_limit, creating=True)
        message = Message(
            message_id or self.snowflake(),
            channel.id,
            author,
            str(payload.get("content") or ""),
            list(payload.get("components") or []),
            list(payload.get("embeds") or []),
            flags=int(payload.get("flags") or 0),
            guild_id=channel.guild_id,
            at=self.clock(),
        )
        message.ephemeral = bool(message.flags & EPHEMERAL)
        message.pinged = [] if message.silent else pinged(payload)
        message.attachments = self.attach(channel.id, payload, files)
        reference = payload.get("message_reference") or {}
        if reference.get("message_id"):
            self._check_reference(channel, reference)
            message.reference_id = int(reference["message_id"])
        self.all_messages[message.id] = message
        channel.last_message_id = message.id
        channel.message_count += channel.is_thread
        return message

    def _check_reference(self, channel: Channel, reference: Json) -> None:
        target = self.all_messages.get(int(reference["message_id"]))
        if (target is None or target.deleted) and reference.get("fail_if_not_exists", True):
            raise ApiError(
                400,
                50035,
                "Invalid Form Body",
                errors={
                    "message_reference": {
                        "_errors": [
                            {
                                "code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                                "message": "Unknown message",
                            }
                        ]
                    }
                },
            )

    def attach(
        self, channel_id: int, payload: Json, files: list[tuple[str, bytes]]
    ) -> list[Attachment]:
        """Attachments for uploaded `files`, named and described as `payload["attachments"]`
        says (by the index in `id`), each at a signed URL on the fake."""
        described = {str(a.get("id")): a for a in payload.get("attachments") or []}
        made = []
        for index, (filename, data) in enumerate(files):
            meta = described.get(str(index), {})
            name = str(meta.get("filename") or filename)
            made.append(
                self.hosted(
                    channel_id, name, data, _content_type(name), description=meta.get("description")
                )
            )
        return made

    def hosted(
        self, channel_id: int, name: str, data: bytes, content_type: str, **kw: Any
    ) -> Attachment:
        """A file on the fake's CDN; its URL is signed over the unquoted path."""
        attachment = Attachment(self.snowflake(), name, data, content_type, **kw)
        path = f"/attachments/{channel_id}/{attachment.id}/{name}"
        issued = int(time.time())
        expires = issued + LINK_LIFE
        signature = _sign(path, expires)
        where = f"/attachments/{channel_id}/{attachment.id}/{quote(name)}"
        attachment.url = f"{self.url}{where}?ex={expires:x}&is={issued:x}&hm={signature}&"
        self.files[attachment.id] = attachment
        return attachment

    def link_valid(self, path: str, expires: str, signature: str) -> bool:
        try:
            expiry = int(expires, 16)
        except ValueError:
            return False
        return hmac.compare_digest(_sign(path, expiry), signature) and expiry > time.time()

    def edit(self, message: Message, payload: Json, files: list[tuple[str, bytes]]) -> None:
        """Apply a message edit (only the fields present change)."""
        check_message(payload, files, self.upload_limit, creating=False)
        if message.author.id != BOT.id:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        if "content" in payload:
            message.content = str(payload["content"] or "")
        if "components" in payload:
            message.components = list(payload["components"] or [])
        if "embeds" in payload:
            message.embeds = list(payload["embeds"] or [])
        if "flags" in payload and payload["flags"] is not None:
            message.flags = int(payload["flags"]) | (message.flags & EPHEMERAL)
        if "attachments" in payload or files:
            kept = {str(a.get("id")) for a in payload.get("attachments") or []}
            old = [a for a in message.attachments if str(a.id) in kept]
            message.attachments = old + self.attach(message.channel_id, payload, files)
        message.edited_at.append(self.clock())
        message.edited = time.time()

    # --- events --------------------------------------------------------------------------

    async def announce(self, event: str, message: Message) -> None:
        """MESSAGE_CREATE / MESSAGE_UPDATE for `message`, to the sessions that get it."""
        if message.ephemeral:
            return
        reference = self.all_messages.get(message.reference_id or 0)
        await self.gateway.dispatch(event, lambda s: self.message_event(s, message, reference))

    def message_event(
        self, session: Session, message: Message, reference: Message | None
    ) -> Json | None:
        channel = self.channels.get(message.channel_id)
        in_dm = channel is not None and channel.type == DM
        if not session.wants(DIRECT_MESSAGES if in_dm else GUILD_MESSAGES):
            return None
        return message.json(redact=self.redacted(session.intents, message), reference=reference)

    def redacted(self, intents: int, message: Message) -> bool:
        """Whether a bot with `intents` is shown `message` without its content."""
        channel = self.channels.get(message.channel_id)
        in_dm = channel is not None and channel.type == DM
        mentioned = any(u.id == BOT.id for u in message.mentions)
        visible = intents & MESSAGE_CONTENT or in_dm or mentioned or message.author.id == BOT.id
        return not visible

    async def announce_delete(self, message: Message) -> None:
        data: Json = {"id": str(message.id), "channel_id": str(message.channel_id)}
        if message.guild_id:
            data["guild_id"] = str(message.guild_id)
        in_dm = message.guild_id is None
        await self.gateway.dispatch(
            "MESSAGE_DELETE",
            lambda s: data if s.wants(DIRECT_MESSAGES if in_dm else GUILD_MESSAGES) else None,
        )

    async def announce_thread(self, thread: Channel) -> None:
        data = {**thread.json(), "newly_created": True}
        await self.gateway.dispatch("THREAD_CREATE", lambda s: data if s.wants(GUILDS) else None)


def _sign(path: str, expires: int) -> str:
    return hmac.new(_SIGNING_KEY, f"{path}:{expires}".encode(), hashlib.sha256).hexdigest()


_TYPES = {
    "txt": "text/plain; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "json": "application/json; charset=utf-8",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "ogg": "audio/ogg",
    "pdf": "application/pdf",
    "zip": "application/zip",
    "diff": "text/x-diff; charset=utf-8",
    "patch": "text/x-diff; charset=utf-8",
}


def _content_type(name: str) -> str:
    """Discord sets an upload's content_type from its name (discord.py sends them all
    as application/octet-stream)."""
    return _TYPES.get(name.rsplit(".", 1)[-1].lower(), "application/octet-stream")


def pinged(payload: Json) -> list[int]:
    """The users a new message notifies by mention: those its content mentions that its
    `allowed_mentions` lets through (resources/message#allowed-mentions-object; without
    the object every mention notifies)."""
    named = [int(i) for i in re.findall(r"<@!?(\d+)>", str(payload.get("content") or ""))]
    allowed = payload.get("allowed_mentions")
    if allowed is None:
        return named
    listed = {int(u) for u in allowed.get("users") or []}
    return [u for u in named if "users" in (allowed.get("parse") or []) or u in listed]

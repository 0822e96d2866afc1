"""The fake Discord's REST routes for a bot: who it is, where the gateway is, channels,
DMs, messages (create, get, history, edit, delete), reactions, typing, threads (from a
message, without one, forum posts), the guild, and application commands.

`GET /users/@me/guilds` answers with the bot's permissions in the guild, less those a
test `withheld` (what `pi-bridge check` reads). Each handler takes the recorded `Call`
and the route's parameters and returns the JSON answer (None: 204 No Content). Errors
are `ApiError`s with Discord's JSON error codes (topics/opcodes-and-status-codes#json):
10003 Unknown Channel, 10008 Unknown Message, 10013 Unknown User, 10007 Unknown Member,
10014 Unknown Emoji, 30010 too many reactions (20), 40058 a message sent to a forum
itself, 50005 editing another user's message, 50013 Missing Permissions (deleting
another user's message: the bot's role lacks MANAGE_MESSAGES), 160004 a second thread
on one message. Route shapes follow
resources/{user,channel,message,guild} and interactions/application-commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from tests.support.fake_discord_checks import ApiError, check_commands, form_error
from tests.support.fake_discord_gateway import APP_FLAGS
from tests.support.fake_discord_model import (
    ALICE,
    APP_ID,
    BOT,
    FORUM_TAGS,
    GUILD_FORUM,
    GUILD_ID,
    GUILD_TEXT,
    PRIVATE_THREAD,
    PUBLIC_THREAD,
    ROLES,
    USERS,
    Channel,
    Typing,
    guild_json,
    member_json,
    permissions_of,
)
from tests.support.fake_discord_store import Store

if TYPE_CHECKING:
    from tests.support.fake_discord_model import Call, Message

Json = dict[str, Any]
MAX_REACTIONS = 20
MAX_THREAD_NAME = 100


class RestMethods(Store):
    """REST handlers; `ROUTES` maps (method, path template) to a handler's name."""

    enabled: frozenset[str]
    withheld: int = 0  # permission bits the bot's role lacks, for `GET /users/@me/guilds`

    ROUTES: ClassVar[list[tuple[str, str, str]]] = [
        ("GET", "/users/@me", "_me"),
        ("GET", "/users/{user_id}", "_user"),
        ("GET", "/oauth2/applications/@me", "_application"),
        ("GET", "/applications/@me", "_application"),
        ("GET", "/gateway/bot", "_gateway_bot"),
        ("GET", "/gateway", "_gateway_url"),
        ("POST", "/users/@me/channels", "_open_dm"),
        ("GET", "/users/@me/guilds", "_my_guilds"),
        ("GET", "/channels/{channel_id}", "_get_channel"),
        ("GET", "/channels/{channel_id}/messages", "_history"),
        ("POST", "/channels/{channel_id}/messages", "_create_message"),
        ("GET", "/channels/{channel_id}/messages/{message_id}", "_get_message"),
        ("PATCH", "/channels/{channel_id}/messages/{message_id}", "_edit_message"),
        ("DELETE", "/channels/{channel_id}/messages/{message_id}", "_delete_message"),
        ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", "_react"),
        (
            "DELETE",
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
            "_unreact",
        ),
        ("POST", "/channels/{channel_id}/typing", "_typing"),
        ("POST", "/channels/{channel_id}/messages/{message_id}/threads", "_thread_from_message"),
        ("POST", "/channels/{channel_id}/threads", "_thread"),
        ("PUT", "/channels/{channel_id}/thread-members/@me", "_join_thread"),
        ("GET", "/guilds/{guild_id}", "_guild"),
        ("GET", "/guilds/{guild_id}/channels", "_guild_channels"),
        ("GET", "/guilds/{guild_id}/roles", "_roles"),
        ("GET", "/guilds/{guild_id}/members/{user_id}", "_member"),
        ("GET", "/applications/{application_id}/commands", "_get_commands"),
        ("PUT", "/applications/{application_id}/commands", "_put_commands"),
        ("GET", "/applications/{application_id}/guilds/{guild_id}/commands", "_get_commands"),
        ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", "_put_commands"),
    ]

    # --- who and where -----------------------------------------------------------------

    async def _me(self, call: Call, p: dict[str, str]) -> Json:
        return {
            **BOT.json(),
            "verified": True,
            "mfa_enabled": False,
            "flags": 0,
            "email": None,
            "locale": "en-US",
        }

    async def _user(self, call: Call, p: dict[str, str]) -> Json:
        user = USERS.get(int(p["user_id"]))
        if user is None:
            raise ApiError(404, 10013, "Unknown User")
        return user.json()

    async def _application(self, call: Call, p: dict[str, str]) -> Json:
        flags = sum(bit for name, bit in APP_FLAGS.items() if name in self.enabled)
        return {
            "id": str(APP_ID),
            "name": BOT.global_name,
            "icon": None,
            "description": "",
            "summary": "",
            "rpc_origins": [],
            "bot_public": True,
            "bot_require_code_grant": False,
            "bot": BOT.json(),
            "owner": ALICE.json(),
            "team": None,
            "verify_key": "0" * 64,
            "flags": flags,
            "tags": [],
            "redirect_uris": [],
            "interactions_endpoint_url": None,
            "approximate_guild_count": 1,
        }

    async def _gateway_bot(self, call: Call, p: dict[str, str]) -> Json:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}
        return {**await self._gateway_url(call, p), "shards": 1, "session_start_limit": limit}

    async def _gateway_url(self, call: Call, p: dict[str, str]) -> Json:
        return {"url": self.gateway_url}

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def _my_guilds(self, call: Call, p: dict[str, str]) -> list[Json]:
        """The bot's servers, each with the bot's permissions there (resources/user#get-
        current-user-guilds: a partial guild with `permissions`, from its roles)."""
        permissions = permissions_of(BOT) & ~self.withheld
        return [
            {
                "id": str(GUILD_ID),
                "name": "Team",
                "icon": None,
                "owner": False,
                "permissions": str(permissions),
                "features": [],
            }
        ]

    async def _open_dm(self, call: Call, p: dict[str, str]) -> Json:
        user = USERS.get(int((call.json or {}).get("recipient_id") or 0))
        if user is None or user.id == BOT.id:
            raise form_error(["recipient_id"], "NUMBER_TYPE_COERCE", "Value is not snowflake.")
        return self.channel(self.dm_channel(user)).json()

    # --- channels and messages ---------------------------------------------------------

    async def _get_channel(self, call: Call, p: dict[str, str]) -> Json:
        return self.channel(p["channel_id"]).json()

    async def _history(self, call: Call, p: dict[str, str]) -> list[Json]:
        """Newest first, as Discord lists them; `before`, `after`, `limit` (1-100)."""
        channel = self.channel(p["channel_id"])
        limit = max(1, min(100, int(call.query.get("limit", 50))))
        found = [
            m
            for m in self.all_messages.values()
            if m.channel_id == channel.id and not m.deleted and not m.ephemeral
        ]
        if "before" in call.query:
            found = [m for m in found if m.id < int(call.query["before"])]
        if "after" in call.query:
            found = [m for m in found if m.id > int(call.query["after"])][:limit]
        return [self._shown(m) for m in sorted(found, key=lambda m: -m.id)[:limit]]

    def _shown(self, message: Message) -> Json:
        """A message read over REST: without content unless the app may read it."""
        intents = 1 << 15 if "message_content" in self.enabled else 0
        return message.json(redact=self.redacted(intents, message))

    async def _create_message(self, call: Call, p: dict[str, str]) -> Json:
        channel = self.channel(p["channel_id"])
        if channel.type == GUILD_FORUM:
            raise ApiError(400, 40058, "Cannot send messages in a forum channel")
        message = self.new_message(channel, BOT, dict(call.json or {}), call.files)
        await self.announce("MESSAGE_CREATE", message)
        return message.json(reference=self.all_messages.get(message.reference_id or 0))

    async def _get_message(self, call: Call, p: dict[str, str]) -> Json:
        return self._shown(self.message_in(p["channel_id"], p["message_id"]))

    async def _edit_message(self, call: Call, p: dict[str, str]) -> Json:
        message = self.message_in(p["channel_id"], p["message_id"])
        self.edit(message, dict(call.json or {}), call.files)
        await self.announce("MESSAGE_UPDATE", message)
        return message.json()

    async def _delete_message(self, call: Call, p: dict[str, str]) -> None:
        message = self.message_in(p["channel_id"], p["message_id"])
        if message.author.id != BOT.id:
            raise ApiError(403, 50013, "Missing Permissions")
        message.deleted = True
        await self.announce_delete(message)

    async def _react(self, call: Call, p: dict[str, str]) -> None:
        message = self.message_in(p["channel_id"], p["message_id"])
        emoji = _checked_emoji(p["emoji"])
        if emoji not in message.reactions:
            if len(message.reactions) >= MAX_REACTIONS:
                raise ApiError(400, 30010, "Maximum number of reactions reached (20)")
            message.reactions.append(emoji)
        self.reactions[message.id] = list(message.reactions)

    async def _unreact(self, call: Call, p: dict[str, str]) -> None:
        message = self.message_in(p["channel_id"], p["message_id"])
        emoji = _checked_emoji(p["emoji"])
        if emoji in message.reactions:
            message.reactions.remove(emoji)
        self.reactions[message.id] = list(message.reactions)

    async def _typing(self, call: Call, p: dict[str, str]) -> None:
        self.typing.append(Typing(self.channel(p["channel_id"]).id, self.clock()))

    # --- threads -----------------------------------------------------------------------

    async def _thread_from_message(self, call: Call, p: dict[str, str]) -> Json:
        parent = self.channel(p["channel_id"])
        message = self.message_in(parent.id, p["message_id"])
        if parent.type != GUILD_TEXT:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        if message.thread_id is not None:
            raise ApiError(400, 160004, "A thread has already been created for this message")
        # A thread started from a message has the message's id (resources/channel#start-
        # thread-from-message: "the id of the created thread will be the same as the id
        # of the source message").
        thread = self._new_thread(parent, (call.json or {}).get("name"), PUBLIC_THREAD, message.id)
        message.thread_id = thread.id
        await self.announce_thread(thread)
        return thread.json()

    async def _thread(self, call: Call, p: dict[str, str]) -> Json:
        parent = self.channel(p["channel_id"])
        body = dict(call.json or {})
        if parent.type == GUILD_FORUM:
            return await self._forum_post(parent, body, call.files)
        if parent.type != GUILD_TEXT:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        kind = int(body.get("type") or PRIVATE_THREAD)
        if kind not in (PUBLIC_THREAD, PRIVATE_THREAD):
            raise form_error(["type"], "BASE_TYPE_CHOICES", "Value must be one of (11, 12).")
        thread = self._new_thread(parent, body.get("name"), kind, self.snowflake())
        await self.announce_thread(thread)
        return thread.json()

    async def _forum_post(self, forum: Channel, body: Json, files: list[tuple[str, bytes]]) -> Json:
        """A forum post: a thread whose first message has the thread's id."""
        if not isinstance(body.get("message"), dict):
            raise form_error(["message"], "BASE_TYPE_REQUIRED", "This field is required")
        known = {t["id"] for t in FORUM_TAGS}
        tags = [str(t) for t in body.get("applied_tags") or []]
        if any(t not in known for t in tags):
            raise form_error(["applied_tags"], "BASE_TYPE_CHOICES", "Unknown tag")
        thread = self._new_thread(forum, body.get("name"), PUBLIC_THREAD, self.snowflake())
        thread.applied_tags = tags
        try:
            starter = self.new_message(thread, BOT, body["message"], files, message_id=thread.id)
        except ApiError:
            del self.channels[thread.id]
            raise
        await self.announce_thread(thread)
        await self.announce("MESSAGE_CREATE", starter)
        return {**thread.json(), "message": starter.json()}

    def _new_thread(self, parent: Channel, name: object, kind: int, thread_id: int) -> Channel:
        if not 1 <= len(str(name or "")) <= MAX_THREAD_NAME:
            raise form_error(
                ["name"],
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between 1 and {MAX_THREAD_NAME} in length.",
            )
        thread = Channel(thread_id, kind, str(name), parent.guild_id, parent.id, BOT.id)
        self.channels[thread.id] = thread
        return thread

    async def _join_thread(self, call: Call, p: dict[str, str]) -> None:
        if not self.channel(p["channel_id"]).is_thread:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")

    # --- the guild -----------------------------------------------------------------------

    async def _guild(self, call: Call, p: dict[str, str]) -> Json:
        self._our_guild(p)
        data = guild_json([], members=False, member_count=len(USERS))
        return {**data, "approximate_member_count": len(USERS)}

    async def _guild_channels(self, call: Call, p: dict[str, str]) -> list[Json]:
        self._our_guild(p)
        return [c.json() for c in self.channels.values() if c.guild_id and not c.is_thread]

    async def _roles(self, call: Call, p: dict[str, str]) -> list[Json]:
        self._our_guild(p)
        return [r.json() for r in ROLES]

    async def _member(self, call: Call, p: dict[str, str]) -> Json:
        self._our_guild(p)
        user = USERS.get(int(p["user_id"]))
        if user is None:
            raise ApiError(404, 10007, "Unknown Member")
        return member_json(user)

    def _our_guild(self, p: dict[str, str]) -> None:
        if int(p["guild_id"]) != GUILD_ID:
            raise ApiError(404, 10004, "Unknown Guild")

    # --- application commands ----------------------------------------------------------

    async def _get_commands(self, call: Call, p: dict[str, str]) -> list[Json]:
        return list(self.commands.get(self._command_scope(p), []))

    async def _put_commands(self, call: Call, p: dict[str, str]) -> list[Json]:
        """Bulk overwrite: the list replaces the scope's commands; a command keeps its id
        while its name and type stay (interactions/application-commands#bulk-overwrite)."""
        scope = self._command_scope(p)
        commands = list(call.json or [])
        check_commands(commands)
        old = {(c["type"], c["name"]): c["id"] for c in self.commands.get(scope, [])}
        stored = []
        for command in commands:
            kind = int(command.get("type", 1))
            stored.append(
                {
                    "options": [],
                    "default_member_permissions": None,
                    "dm_permission": True,
                    "nsfw": False,
                    **command,
                    "id": old.get((kind, command["name"])) or str(self.snowflake()),
                    "application_id": str(APP_ID),
                    "type": kind,
                    "version": str(self.snowflake()),
                    **({"guild_id": str(scope)} if scope else {}),
                }
            )
        self.commands[scope] = stored
        return stored

    def _command_scope(self, p: dict[str, str]) -> int | None:
        if int(p["application_id"]) != APP_ID:
            raise ApiError(403, 50001, "Missing Access")
        if "guild_id" in p:
            self._our_guild(p)
            return GUILD_ID
        return None


def _checked_emoji(emoji: str) -> str:
    """A unicode emoji, or `name:id` of a custom one (the guild has none)."""
    if ":" in emoji or emoji.isascii():
        raise ApiError(400, 10014, "Unknown Emoji")
    return emoji

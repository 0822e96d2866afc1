"""A fake Discord (REST API v10 and the Gateway) on 127.0.0.1 for tests of the real
discord.py 2.7 client.

While a `FakeDiscord` is open, discord.py talks to it: `discord.http.Route.BASE` is its
`/api/v10` and `DiscordWebSocket.DEFAULT_GATEWAY` its `/gateway` (a plain `Client` never
asks `GET /gateway/bot`); both are put back when it closes (`discord_pointed_at`). It
serves one guild (text channels, a forum, roles, members), DMs, messages with files,
threads, reactions, typing, application commands and interactions; the world's ids and
users are in fake_discord_model.py, the checks in fake_discord_checks.py, the gateway in
fake_discord_gateway.py, the routes in fake_discord_rest.py and
fake_discord_interactions.py.

Tests act as users with `user_says()`, `voice()`, `user_creates_thread()`, `press()`,
`slash()` and `submit_modal()`, and read what the bot did in `calls`, `messages()`,
`bot_messages()`, `find()`, `threads`, `typing`, `reactions`, `modals`, `interactions`
and `commands`; `wait_for()` polls any of them. `fail()` makes the next matching call
fail with a chosen Discord error (or 429).

Limits. Always, as Discord never accepts them (fake_discord_checks.py): content over 2000
characters, over 5 action rows or 5 buttons in a row, custom_ids over 100 characters
(50035 Invalid Form Body), files over `upload_limit` (413, 40005). With
`enforce_limits=True`, the rate limits (fake_discord_limits.py): headers on every answer
of a limited route, 429s past a bucket or the global 50/s. Sources, at
docs.discord.com/developers/: topics/rate-limits, resources/message#create-message,
reference#uploading-files, components/reference, interactions/receiving-and-responding
(the 3-second deadline, 15-minute tokens), events/gateway (intents, message content),
topics/opcodes-and-status-codes (the JSON error and gateway close codes).
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, TypeVar

import discord.gateway
import discord.http
import yarl
from aiohttp import web

from tests.support.fake_discord_checks import ApiError
from tests.support.fake_discord_gateway import APP_FLAGS, GUILD_MEMBERS, Gateway, Session, World
from tests.support.fake_discord_interactions import InteractionMethods
from tests.support.fake_discord_limits import VIA, RateLimits, limited
from tests.support.fake_discord_model import (
    ALICE,
    APP_ID,
    BOB,
    BOT,
    FORUM,
    FORUM_TAGS,
    GENERAL,
    GUILD_FORUM,
    GUILD_ID,
    IS_VOICE_MESSAGE,
    PUBLIC_THREAD,
    RANDOM,
    ROLE_PI_USERS,
    TOKEN,
    UPLOAD_LIMIT,
    USERS,
    Attachment,
    Call,
    Channel,
    Interaction,
    Message,
    Modal,
    User,
    guild_json,
    member_json,
    world_channels,
)
from tests.support.fake_discord_rest import RestMethods
from tests.support.fake_discord_store import WAIT
from tests.support.loopback import serve_on_loopback, until

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from types import TracebackType

# Re-exported: tests import the world and its records from here.
__all__ = [
    "ALICE",
    "APP_ID",
    "BOB",
    "BOT",
    "FORUM",
    "FORUM_TAGS",
    "GENERAL",
    "GUILD_ID",
    "RANDOM",
    "ROLE_PI_USERS",
    "TOKEN",
    "Attachment",
    "Call",
    "Channel",
    "FakeDiscord",
    "Interaction",
    "Message",
    "Modal",
    "User",
    "discord_pointed_at",
]

T = TypeVar("T")
Json = dict[str, Any]
# Voice messages' waveform: up to 256 amplitude bytes, base64 (resources/message#attachment-object).
WAVEFORM = base64.b64encode(bytes(i * 7 % 256 for i in range(64))).decode()
MAX_REQUEST = 64 * 2**20  # aiohttp's request cap, above any upload the fake refuses itself


@contextlib.contextmanager
def discord_pointed_at(api_url: str, gateway_url: str) -> Iterator[None]:
    """discord.py's REST base and default gateway set to a fake's, restored after."""
    saved = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = api_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
    try:
        yield
    finally:
        discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved


@dataclass
class _Failure:
    method: str
    pattern: str
    error: ApiError
    times: int


class FakeDiscord(RestMethods, InteractionMethods):
    def __init__(
        self,
        token: str = TOKEN,
        *,
        enforce_limits: bool = False,
        window_scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        privileged_intents: frozenset[str] = frozenset({"message_content", "members"}),
        upload_limit: int = UPLOAD_LIMIT,
        point_discord: bool = True,
    ) -> None:
        self.token = token
        self.enforce_limits = enforce_limits
        self.clock = clock
        self.enabled = privileged_intents
        self.upload_limit = upload_limit
        self.point_discord = point_discord
        self._init_store()
        self.channels = {c.id: c for c in world_channels()}
        self.rate_limits = RateLimits(clock, window_scale)
        self.gateway = Gateway(
            World(
                token,
                privileged_intents,
                self._ready,
                self._guild_create,
                lambda: [member_json(u) for u in USERS.values()],
            )
        )
        self._failures: list[_Failure] = []
        self._routes = [
            (method, template, _compile(template), getattr(self, name))
            for method, template, name in [*RestMethods.ROUTES, *InteractionMethods.ROUTES]
        ]
        self._runner: web.AppRunner | None = None
        self._exit = contextlib.ExitStack()

    # --- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=MAX_REQUEST)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._api)
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_get("/gateway/", self.gateway.handle)
        app.router.add_get("/attachments/{channel}/{attachment}/{name}", self._download)
        self._runner, self.port = await serve_on_loopback(app)
        if self.point_discord:
            self._exit.enter_context(discord_pointed_at(self.api_url, self.gateway_url))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._exit:
            await self.gateway.close()
            if self._runner is not None:
                await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v10"

    # --- scripting ----------------------------------------------------------------------

    def fail(
        self,
        method: str,
        pattern: str,
        status: int = 403,
        code: int = 50013,
        message: str = "Missing Permissions",
        *,
        times: int = 1,
        retry_after: float | None = None,
    ) -> None:
        """The next `times` calls of `method` ("*": any) whose path matches `pattern`
        (fnmatch, e.g. "/channels/*/messages") fail with this Discord error; status 429
        answers as a rate limit of `retry_after` seconds (0.1 by default)."""
        if status == 429:
            error = limited(retry_after or 0.1, {"X-RateLimit-Scope": "user"})
        else:
            error = ApiError(status, code, message)
        self._failures.append(_Failure(method.upper(), pattern, error, times))

    async def user_says(
        self,
        channel_id: int,
        text: str,
        *,
        user: User = ALICE,
        mentions_bot: bool = False,
        attachments: Iterable[tuple[str, bytes, str]] = (),
        reply_to: Message | int | None = None,
    ) -> Message:
        """`user` posts `text` in `channel_id` (MESSAGE_CREATE); `attachments` are
        (filename, data, content type); `mentions_bot` starts the text with the mention."""
        await self.connected()
        channel = self.channel(channel_id)
        if channel.type == GUILD_FORUM:
            raise ValueError("users post in a forum through a thread: user_creates_thread()")
        payload: Json = {"content": f"<@{BOT.id}> {text}" if mentions_bot else text}
        if reply_to is not None:
            target = reply_to.id if isinstance(reply_to, Message) else reply_to
            payload["message_reference"] = {"message_id": str(target)}
        message = self.new_message(channel, user, payload, check=False)
        message.mentions = [BOT] if mentions_bot else []
        message.attachments = [self.hosted(channel.id, *a) for a in attachments]
        await self.announce("MESSAGE_CREATE", message)
        return message

    async def voice(
        self, channel_id: int, ogg: bytes, *, user: User = ALICE, duration: float = 2.0
    ) -> Message:
        """A voice message (flag IS_VOICE_MESSAGE, one audio/ogg attachment with its
        duration and waveform, no text), as Discord's clients send them."""
        await self.connected()
        channel = self.channel(channel_id)
        message = self.new_message(channel, user, {"flags": IS_VOICE_MESSAGE}, check=False)
        message.attachments = [
            self.hosted(
                channel.id,
                "voice-message.ogg",
                ogg,
                "audio/ogg",
                duration=duration,
                waveform=WAVEFORM,
            )
        ]
        await self.announce("MESSAGE_CREATE", message)
        return message

    async def user_creates_thread(
        self, channel_id: int, name: str, text: str, *, user: User = ALICE
    ) -> Channel:
        """`user` opens a thread: a forum post in a forum (its starter message has the
        thread's id), else a public thread with `text` as its first message."""
        await self.connected()
        parent = self.channel(channel_id)
        thread = Channel(self.snowflake(), PUBLIC_THREAD, name, parent.guild_id, parent.id, user.id)
        self.channels[thread.id] = thread
        await self.announce_thread(thread)
        message_id = thread.id if parent.type == GUILD_FORUM else None
        first = self.new_message(
            thread, user, {"content": text}, check=False, message_id=message_id
        )
        await self.announce("MESSAGE_CREATE", first)
        return thread

    async def request_reconnect(self) -> None:
        """Op 7 RECONNECT: the bot reconnects and RESUMEs; missed events are replayed."""
        await self.gateway.reconnect()

    # --- reading ---------------------------------------------------------------------------

    def messages(self, channel_id: int, *, deleted: bool = False) -> list[Message]:
        """The channel's messages, oldest first (deleted ones only with `deleted`)."""
        found = [
            m
            for m in self.all_messages.values()
            if m.channel_id == channel_id and (deleted or not m.deleted)
        ]
        return sorted(found, key=lambda m: m.id)

    def bot_messages(self, channel_id: int | None = None) -> list[Message]:
        found = [
            m
            for m in self.all_messages.values()
            if m.from_bot and not m.deleted and channel_id in (None, m.channel_id)
        ]
        return sorted(found, key=lambda m: m.id)

    def message(self, message_id: int) -> Message:
        return self.all_messages[message_id]

    def find(self, text: str, channel_id: int | None = None) -> Message | None:
        """The latest live message containing `text`."""
        found = [
            m
            for m in self.all_messages.values()
            if text in m.content and not m.deleted and channel_id in (None, m.channel_id)
        ]
        return max(found, key=lambda m: m.id, default=None)

    @property
    def threads(self) -> list[Channel]:
        return [c for c in self.channels.values() if c.is_thread]

    @property
    def identified(self) -> list[Json]:
        return self.gateway.identified

    @property
    def resumes(self) -> int:
        return self.gateway.resumes

    def called(self, method: str, pattern: str = "*") -> list[Call]:
        return [
            c
            for c in self.calls
            if c.method == method.upper() and fnmatch.fnmatchcase(c.path, pattern)
        ]

    async def wait_for(self, predicate: Callable[[], T | None], within: float = WAIT) -> T:
        """Poll `predicate()` until it is truthy; its value."""
        found: list[T] = []

        def look() -> bool:
            value = predicate()
            if value:
                found.append(value)
            return bool(value)

        await until(look, within)
        return found[0]

    # --- the server -----------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        call = await _record(request, path, self.clock())
        self.calls.append(call)
        headers: dict[str, str] = {}
        try:
            template, params, handler = self._route(call)
            if not template.startswith(("/interactions/", "/webhooks/")):
                self._authorize(request)
            self._take_failure(call)
            if self.enforce_limits:
                headers = self.rate_limits.admit(call.method, template, params)
            result = await handler(call, params)
        except ApiError as error:
            call.status = error.status
            if error.status == 429:
                self.limited.append(call)
            return _json(error.body(), error.status, VIA | headers | error.headers)
        call.status = 204 if result is None else 200
        if result is None:
            return web.Response(status=204, headers=VIA | headers)
        return _json(result, 200, VIA | headers)

    def _route(self, call: Call) -> tuple[str, dict[str, str], Any]:
        for method, template, pattern, handler in self._routes:
            matched = pattern.fullmatch(call.path)
            if method == call.method and matched:
                return template, matched.groupdict(), handler
        raise ApiError(404, 0, "404: Not Found")

    def _authorize(self, request: web.Request) -> None:
        if request.headers.get("Authorization") != f"Bot {self.token}":
            raise ApiError(401, 0, "401: Unauthorized")

    def _take_failure(self, call: Call) -> None:
        for failure in self._failures:
            if failure.method in ("*", call.method) and fnmatch.fnmatchcase(
                call.path, failure.pattern
            ):
                failure.times -= 1
                if failure.times <= 0:
                    self._failures.remove(failure)
                raise failure.error

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        query = request.query
        attachment = self.files.get(int(request.match_info["attachment"]))
        if attachment is None or not self.link_valid(
            path, query.get("ex", ""), query.get("hm", "")
        ):
            return web.Response(status=404, text="This content is no longer available.")
        self.downloads.append(path)
        return web.Response(body=attachment.data, headers={"Content-Type": attachment.content_type})

    # --- gateway payloads -------------------------------------------------------------------

    def _ready(self, session: Session) -> Json:
        flags = sum(bit for name, bit in APP_FLAGS.items() if name in self.enabled)
        ready: Json = {
            "v": 10,
            "user": {**BOT.json(), "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(APP_ID), "flags": flags},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "auth": {},
            "_trace": ["fake-discord-gateway"],
        }
        if session.shard is not None:
            ready["shard"] = session.shard
        return ready

    def _guild_create(self, session: Session) -> Json:
        channels = list(self.channels.values())
        members = session.wants(GUILD_MEMBERS)
        return guild_json(channels, members=members, member_count=len(USERS))


def _json(body: object, status: int, headers: dict[str, str]) -> web.Response:
    """A JSON answer typed exactly `application/json`, as Discord's are: discord.py
    decodes a body only when the header says exactly that."""
    headers = headers | {"Content-Type": "application/json"}
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers)


def _compile(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\w+\})", template)
    return re.compile(
        "".join(
            f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("{") else re.escape(part)
            for part in parts
        )
    )


async def _record(request: web.Request, path: str, at: float) -> Call:
    """The call as the fake keeps it: JSON body, or a multipart's payload_json and files."""
    body, payload, files = b"", None, []
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        for name, value in sorted(form.items(), key=lambda item: _file_index(item[0])):
            if isinstance(value, web.FileField):
                files.append((value.filename, value.file.read()))
            elif name == "payload_json":
                payload = json.loads(str(value))
    elif request.can_read_body:
        body = await request.read()
        if request.content_type == "application/json" and body:
            payload = json.loads(body)
    return Call(request.method, path, dict(request.query), payload, body, files, at)


def _file_index(name: str) -> int:
    found = re.fullmatch(r"files\[(\d+)\]", name)
    return int(found.group(1)) if found else -1

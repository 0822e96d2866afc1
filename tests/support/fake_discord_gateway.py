"""The fake Discord's Gateway: the websocket a bot's events come through
(docs.discord.com/developers/events/gateway).

A connection gets HELLO (op 10, the heartbeat interval), and must IDENTIFY (op 2, the
token and intents) or RESUME (op 6) before anything else (close 4003). A wrong token
closes it 4004, a frame that is not JSON 4002, a privileged intent not enabled for the
app 4014 ("Disallowed intent(s)"). After IDENTIFY: READY (the bot user, the guild as
unavailable, the session id and `resume_gateway_url`), then GUILD_CREATE with the guild's
channels, threads, roles and members (with the guilds intent). Heartbeats (op 1) are
acknowledged (op 11); op 8 (request guild members) is answered with one
GUILD_MEMBERS_CHUNK.

Events are numbered per session (`s`) and kept, so a RESUME with the last `s` seen gets
the events it missed, then RESUMED; an unknown session gets op 9 (invalid session,
`d: false`). `reconnect()` sends op 7 RECONNECT, as Discord does before moving a session;
events dispatched until the client resumes wait in the session. A session closed by the
client with 1000/1001 is over (Discord invalidates it); any other close keeps it
resumable.

Transport compression: with `compress=zlib-stream` in the URL every payload is a binary
frame of one shared zlib stream, each ending with a Z_SYNC_FLUSH (00 00 ff ff), as
discord.py expects; without it, text frames. Other compressions (zstd-stream) are not
served: their connections get text frames, which discord.py reads as well.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from collections.abc import Callable

Json = dict[str, Any]

DISPATCH, HEARTBEAT, IDENTIFY, PRESENCE_UPDATE, RESUME, RECONNECT = 0, 1, 2, 3, 6, 7
REQUEST_MEMBERS, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 8, 9, 10, 11
HEARTBEAT_MS = 41_250  # what Discord's HELLO says
# Intents (events/gateway#list-of-intents).
GUILDS = 1 << 0
GUILD_MEMBERS = 1 << 1
GUILD_PRESENCES = 1 << 8
GUILD_MESSAGES = 1 << 9
DIRECT_MESSAGES = 1 << 12
MESSAGE_CONTENT = 1 << 15
PRIVILEGED = {
    "members": GUILD_MEMBERS,
    "presences": GUILD_PRESENCES,
    "message_content": MESSAGE_CONTENT,
}
# Application flags saying a privileged intent is enabled (resources/application).
APP_FLAGS = {"members": 1 << 15, "presences": 1 << 13, "message_content": 1 << 19}
# Close codes (topics/opcodes-and-status-codes#gateway-gateway-close-event-codes).
DECODE_ERROR, NOT_AUTHENTICATED, AUTHENTICATION_FAILED, ALREADY_AUTHENTICATED = (
    4002,
    4003,
    4004,
    4005,
)
INVALID_VERSION, INVALID_INTENTS, DISALLOWED_INTENTS = 4012, 4013, 4014


class Connection:
    """One websocket, with its compression stream."""

    def __init__(self, ws: web.WebSocketResponse, *, zlib_stream: bool) -> None:
        self.ws = ws
        self._zlib = zlib.compressobj() if zlib_stream else None

    async def send(self, payload: Json) -> None:
        data = json.dumps(payload)
        if self._zlib is None:
            await self.ws.send_str(data)
        else:
            squeezed = self._zlib.compress(data.encode()) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
            await self.ws.send_bytes(squeezed)


@dataclass
class Session:
    id: str
    intents: int
    shard: list[int] | None = None
    conn: Connection | None = None  # None while the client is away (between connections)
    seq: int = 0
    sent: list[Json] = field(default_factory=list)  # every dispatch, for RESUME
    ended: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def wants(self, intent: int) -> bool:
        return bool(self.intents & intent)


@dataclass
class World:
    """What the gateway serves from the fake: the token, the app's enabled privileged
    intents, and payloads built for a session's intents."""

    token: str
    enabled: frozenset[str]
    ready: Callable[[Session], Json]
    guild: Callable[[Session], Json]
    members: Callable[[], list[Json]]


class Gateway:
    def __init__(self, world: World) -> None:
        self.world = world
        self.sessions: dict[str, Session] = {}
        self.connections: list[dict[str, str]] = []  # each connection's query (v, compress…)
        self.identified: list[Json] = []  # IDENTIFY payloads (without the token)
        self.presences: list[Json] = []
        self.resumes = 0
        self.heartbeats = 0
        self._open: set[web.WebSocketResponse] = set()

    @property
    def live(self) -> list[Session]:
        return [s for s in self.sessions.values() if not s.ended]

    def ready(self) -> bool:
        return any(s.conn is not None and s.seq > 0 for s in self.live)

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        self.connections.append(dict(request.query))
        if request.query.get("v", "10") != "10":
            await ws.close(code=INVALID_VERSION, message=b"Invalid API version.")
            return ws
        conn = Connection(ws, zlib_stream=request.query.get("compress") == "zlib-stream")
        self._open.add(ws)
        session: Session | None = None
        try:
            await conn.send(
                {"op": HELLO, "d": {"heartbeat_interval": HEARTBEAT_MS}, "s": None, "t": None}
            )
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                try:
                    payload = json.loads(frame.data)
                except ValueError:
                    await ws.close(code=DECODE_ERROR, message=b"Error while decoding payload.")
                    break
                session = await self._on_frame(conn, session, payload)
        finally:
            self._open.discard(ws)
            if session is not None and session.conn is conn:
                session.conn = None
                session.ended = ws.close_code in (1000, 1001)
        return ws

    async def _on_frame(
        self, conn: Connection, session: Session | None, frame: Json
    ) -> Session | None:
        op, data = frame.get("op"), frame.get("d")
        if op == HEARTBEAT:
            self.heartbeats += 1
            await conn.send({"op": HEARTBEAT_ACK, "d": None, "s": None, "t": None})
        elif op == IDENTIFY and session is None:
            return await self._identify(conn, dict(data or {}))
        elif op == RESUME and session is None:
            return await self._resume(conn, dict(data or {}))
        elif session is None or op in (IDENTIFY, RESUME):
            code = ALREADY_AUTHENTICATED if session else NOT_AUTHENTICATED
            await conn.ws.close(code=code, message=b"Not authenticated.")
        elif op == REQUEST_MEMBERS:
            await self._chunk(session, dict(data or {}))
        elif op == PRESENCE_UPDATE:
            self.presences.append(dict(data or {}))
        return session

    async def _identify(self, conn: Connection, data: Json) -> Session | None:
        self.identified.append({k: v for k, v in data.items() if k != "token"})
        intents = data.get("intents")
        refused = sum(bit for name, bit in PRIVILEGED.items() if name not in self.world.enabled)
        if data.get("token") != self.world.token:
            await conn.ws.close(code=AUTHENTICATION_FAILED, message=b"Authentication failed.")
        elif not isinstance(intents, int) or intents < 0:
            await conn.ws.close(code=INVALID_INTENTS, message=b"Invalid intent(s).")
        elif intents & refused:
            await conn.ws.close(code=DISALLOWED_INTENTS, message=b"Disallowed intent(s).")
        else:
            session = Session(uuid.uuid4().hex, intents, data.get("shard"), conn)
            self.sessions[session.id] = session
            await self.dispatch_to(session, "READY", self.world.ready(session))
            if session.wants(GUILDS):
                await self.dispatch_to(session, "GUILD_CREATE", self.world.guild(session))
            return session
        return None

    async def _resume(self, conn: Connection, data: Json) -> Session | None:
        session = self.sessions.get(str(data.get("session_id")))
        if data.get("token") != self.world.token:
            await conn.ws.close(code=AUTHENTICATION_FAILED, message=b"Authentication failed.")
            return None
        if session is None or session.ended:
            await conn.send({"op": INVALID_SESSION, "d": False, "s": None, "t": None})
            return None
        async with session.lock:
            session.conn = conn
            seen = int(data.get("seq") or 0)
            for payload in session.sent:
                if payload["s"] > seen:
                    await conn.send(payload)
        self.resumes += 1
        await self.dispatch_to(session, "RESUMED", {})
        return session

    async def _chunk(self, session: Session, data: Json) -> None:
        members = self.world.members()
        wanted = {str(u) for u in data.get("user_ids") or []}
        query = str(data.get("query") or "").lower()
        if wanted:
            members = [m for m in members if m["user"]["id"] in wanted]
        elif query:
            members = [m for m in members if m["user"]["username"].startswith(query)]
        chunk: Json = {
            "guild_id": str(data.get("guild_id")),
            "members": members,
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [],
        }
        if data.get("nonce"):
            chunk["nonce"] = data["nonce"]
        await self.dispatch_to(session, "GUILD_MEMBERS_CHUNK", chunk)

    async def dispatch(self, event: str, payload_for: Callable[[Session], Json | None]) -> None:
        """Send `event` to every live session `payload_for` gives a payload for (None:
        the session's intents do not subscribe to it)."""
        for session in self.live:
            data = payload_for(session)
            if data is not None:
                await self.dispatch_to(session, event, data)

    async def dispatch_to(self, session: Session, event: str, data: Json) -> None:
        async with session.lock:
            session.seq += 1
            payload = {"op": DISPATCH, "t": event, "s": session.seq, "d": data}
            session.sent.append(payload)
            if session.conn is not None:
                try:
                    await session.conn.send(payload)
                except (ConnectionError, RuntimeError):
                    session.conn = None  # the client is going; a RESUME replays it

    async def reconnect(self) -> None:
        """Op 7 to every live session; they come back with RESUME."""
        for session in self.live:
            async with session.lock:
                conn, session.conn = session.conn, None
                if conn is not None:
                    await conn.send({"op": RECONNECT, "d": None, "s": None, "t": None})

    async def close(self) -> None:
        for ws in list(self._open):
            await ws.close(code=1001, message=b"Going away.")

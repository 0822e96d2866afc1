"""A fake Slack (Web API, Socket Mode, signed HTTP deliveries) on 127.0.0.1 for the
real slack_sdk and bolt.

`FakeSlack` serves `/api/<method>` for the calls the bridge makes, records every
call (`calls`) and every Socket Mode ack (`acks`), keeps the messages the bot
posted (`messages`), and checks the Block Kit limits Slack enforces (answering
`invalid_blocks` / `msg_too_long` like Slack does). `fail()` makes the next call
of a method fail (e.g. 429 with Retry-After). `mention()`, `thread_message()`,
`dm()` and `press()` push Socket Mode envelopes to the connected app and return
the envelope, so a test can `redeliver()` it. Each call carries the monotonic time
it arrived (`Call.at`). `views.open` checks the modal's shape and its trigger_id
(issued by a press, valid 3 s) and keeps the view (`views`); `submit_view()`
submits one as Slack's `view_submission`. `slash()` sends a slash command; what
an ack carried (a command's private answer) is kept in `acked_with`. Reactions are kept per message
(`reactions`), refusing doubles as Slack does. `usergroups` holds user groups'
members for `usergroups.users.list`. The native streaming methods (chat.startStream,
chat.appendStream, chat.stopStream, assistant.threads.setStatus) come from
`StreamingMethods` (fake_slack_streams.py); a streamed message is in `messages` too.

With `events_url` set (the app's Request URL), the same deliveries go as Slack's
HTTP mode sends them instead: events as JSON, interactivity as a form field
`payload`, each signed with `signing_secret` (`X-Slack-Signature`, v0 scheme),
retries carrying `X-Slack-Retry-Num`. Slack waits 3 s for the answer; the status
is kept in `answers` (0: no answer in time) and a 200 counts as an ack.
`verify_url()` sends the URL verification challenge.

`enforce_limits=True` adds Slack's limits, each method's budget of its own as Slack's
pages document them (fake_slack_limits.py), answering HTTP 429 with `Retry-After` (whole
seconds) and `{"ok": false, "error": "ratelimited"}`, recording the refused call in
`limited` as well as `calls`.

Tests must clear the proxy variables: slack_sdk ignores NO_PROXY
(docs/design.md, "Platform libraries").
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlencode

import aiohttp
from aiohttp import WSMsgType, web

from tests.support.fake_slack_limits import SlackLimits

# Posted and check_message are re-exported: tests import them from here.
from tests.support.fake_slack_messages import Posted as Posted
from tests.support.fake_slack_messages import blocks_of, button_value, mentions, view_ok
from tests.support.fake_slack_messages import check_message as check_message
from tests.support.fake_slack_streams import StreamingMethods
from tests.support.loopback import serve_on_loopback, until

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

TEAM = "T0TEAM"
BOT_USER = "U0BOT"
BOT_ID = "B0BOT"
APP_ID = "A0APP"
ALICE = "U0ALICE"
CHANNEL = "C0CHAN"
DM_CHANNEL = "D0DM"
WAIT = 60.0  # the default wait for the bot: generous, a loaded 2-core CI machine
TRIGGER_LIFE = 3.0  # seconds a press's trigger_id can open a modal
ACK_WITHIN = 3.0  # seconds Slack waits for an HTTP delivery's answer
SIGNING_SECRET = "fake-signing-secret"
Json = dict[str, Any]
# What the manifest grants; auth.test reports the token's scopes in a header.
SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "im:write",
    "chat:write",
    "files:write",
    "files:read",
    "reactions:write",
    "usergroups:read",
    "commands",
)


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    args: Json
    token: str
    at: float = field(default_factory=time.monotonic)  # when it arrived


@dataclass
class Failure:
    error: str
    status: int = 200
    retry_after: float | None = None
    times: int = 1
    html: bool = False  # answered by something in front of Slack: a page, not JSON


@dataclass
class FakeSlack(StreamingMethods):
    bot_token: str = "xoxb-fake"
    app_token: str = "xapp-fake"
    calls: list[Call] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)
    messages: dict[str, Posted] = field(default_factory=dict)  # ts → message
    uploads: dict[str, bytes] = field(default_factory=dict)  # file id → content
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # url path → file
    downloads: list[str] = field(default_factory=list)  # file names asked for, in order
    redirects: dict[str, str] = field(default_factory=dict)  # file name → Location
    streams: dict[str, int] = field(default_factory=dict)  # file name → bytes, no length
    streamed: dict[str, int] = field(default_factory=dict)  # … written before a hang-up
    streams_ended: set[str] = field(default_factory=set)  # … whose handler has returned
    failures: dict[str, Failure] = field(default_factory=dict)
    views: dict[str, Json] = field(default_factory=dict)  # view id → opened view
    triggers: dict[str, float] = field(default_factory=dict)  # trigger_id → issued at
    reactions: dict[str, list[str]] = field(default_factory=dict)  # message ts → names
    usergroups: dict[str, list[str]] = field(default_factory=dict)  # group id → user ids
    scopes: list[str] = field(default_factory=lambda: list(SCOPES))  # the bot token's
    enforce_limits: bool = False
    events_url: str = ""  # the app's Request URL: deliveries go there over HTTP
    signing_secret: str = SIGNING_SECRET
    answers: dict[str, int] = field(default_factory=dict)  # envelope id → HTTP status
    acked_with: dict[str, Json] = field(default_factory=dict)  # envelope id → ack's payload
    limited: list[Call] = field(default_factory=list)  # refused with 429 by the limits
    rate_limits: SlackLimits = field(default_factory=SlackLimits)  # with enforce_limits
    _ws: web.WebSocketResponse | None = None
    _runner: web.AppRunner | None = None
    _port: int = 0
    _serial: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # --- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # slack_sdk GETs a few methods
        app.router.add_get("/socket", self._socket)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files/{name}", self._file)
        self._runner, self._port = await serve_on_loopback(app)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ws is not None:
            await self._ws.close()
        assert self._runner is not None
        await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/api/"

    # --- test controls ---------------------------------------------------------------

    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int = 200,
        retry_after: float | None = None,
        html: bool = False,
    ) -> None:
        """The next call of `method` fails with `error` (and HTTP `status`); `html`:
        as an HTML page, the way a proxy in front of Slack answers."""
        self.failures[method] = Failure(error, status, retry_after, html=html)

    def add_file(self, data: bytes, mime_type: str) -> str:
        """A private file URL (served only with the bot token, like `url_private`)."""
        name = f"F{next(self._serial)}"
        self.files[name] = (data, mime_type)
        return f"{self.url}/files/{name}"

    def add_redirect(self, location: str) -> str:
        """A file URL answered with a redirect to `location`."""
        name = f"F{next(self._serial)}"
        self.redirects[name] = location
        return f"{self.url}/files/{name}"

    def add_stream(self, size: int, mime_type: str) -> str:
        """A file URL whose body is `size` bytes sent without a Content-Length (chunked),
        as a server that does not announce it would; `streamed` counts what went out."""
        name = f"F{next(self._serial)}"
        self.streams[name] = size
        self.files[name] = (b"", mime_type)
        return f"{self.url}/files/{name}"

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(
        self, method: str, where: Callable[[Call], bool] = lambda _: True, within: float = WAIT
    ) -> Call:
        await until(lambda: any(where(c) for c in self.called(method)), within)
        return next(c for c in self.called(method) if where(c))

    async def wait_until(self, predicate: Callable[[], bool], within: float = WAIT) -> None:
        await until(predicate, within)

    async def connected(self, within: float = WAIT) -> None:
        await self.wait_until(lambda: self._ws is not None and not self._ws.closed, within)

    # --- deliveries (Socket Mode, or HTTP) --------------------------------------------------

    def new_ts(self) -> str:
        n = next(self._serial)
        return f"{1_700_000_000 + n}.{n:06d}"

    async def mention(
        self, text: str, *, user: str = ALICE, channel: str = CHANNEL, thread_ts: str | None = None
    ) -> Json:
        return await self.deliver_event(self.mention_event(text, user, channel, thread_ts))

    def mention_event(
        self, text: str, user: str = ALICE, channel: str = CHANNEL, thread_ts: str | None = None
    ) -> Json:
        event: Json = {
            "type": "app_mention",
            "user": user,
            "text": f"<@{BOT_USER}> {text}",
            "ts": self.new_ts(),
            "channel": channel,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    async def thread_message(
        self, text: str, thread_ts: str, *, user: str = ALICE, channel: str = CHANNEL
    ) -> Json:
        event = {
            "type": "message",
            "channel_type": "channel",
            "user": user,
            "text": text,
            "ts": self.new_ts(),
            "thread_ts": thread_ts,
            "channel": channel,
        }
        return await self.deliver_event(event)

    async def dm(
        self,
        text: str,
        *,
        user: str = ALICE,
        channel: str = DM_CHANNEL,
        files: list[Json] | None = None,
        bot_id: str = "",
    ) -> Json:
        """A direct message; `files` as Slack lists them (`url_private`, `size` …);
        `bot_id`: sent by that bot (Slack names its app user in `user`)."""
        event: Json = {
            "type": "message",
            "channel_type": "im",
            "user": user,
            "text": text,
            "ts": self.new_ts(),
            "channel": channel,
        }
        if files is not None:
            event["files"] = files
        if bot_id:
            event["bot_id"] = bot_id
        return await self.deliver_event(event)

    async def deliver_event(self, event: Json) -> Json:
        return await self.send_envelope("events_api", self.event_callback(event))

    def event_callback(self, event: Json) -> Json:
        """`event` wrapped as the Events API delivers it, with a fresh event_id."""
        n = next(self._serial)
        return {
            "token": "verification-token",
            "team_id": TEAM,
            "api_app_id": APP_ID,
            "event": {**event, "team": TEAM, "event_ts": event.get("ts", "")},
            "type": "event_callback",
            "event_id": f"Ev{n:08d}",
            "event_time": 1_700_000_000 + n,
        }

    async def press(self, message_ts: str, action_id: str, *, user: str = ALICE) -> Json:
        """A press on a button of the bot's message `message_ts`."""
        message = self.messages[message_ts]
        value = button_value(message.blocks, action_id)
        action_ts = self.new_ts()
        self.triggers[f"trigger-{action_ts}"] = time.monotonic()
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM, "domain": "fake"},
            "user": {"id": user, "username": "alice", "team_id": TEAM},
            "api_app_id": APP_ID,
            "token": "verification-token",
            "trigger_id": f"trigger-{action_ts}",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
                **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
            },
            "channel": {"id": message.channel, "name": "general"},
            "message": {
                "type": "message",
                "user": BOT_USER,
                "bot_id": BOT_ID,
                "ts": message.ts,
                "text": message.text,
                "blocks": message.blocks,
                **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
            },
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "b",
                    "value": value,
                    "action_ts": action_ts,
                }
            ],
        }
        return await self.send_envelope("interactive", payload)

    async def submit_view(
        self,
        view_id: str | None = None,
        values: dict[str, str | None] | None = None,
        *,
        user: str = ALICE,
    ) -> Json:
        """Submit an opened modal (the last one by default) with `values` by action_id,
        as Slack does: `view.state.values[block_id][action_id].value`."""
        view = self.views[view_id] if view_id else list(self.views.values())[-1]
        state: dict[str, Json] = {}
        for block in view["blocks"]:
            if block.get("type") == "input":
                action = block["element"]["action_id"]
                value = (values or {}).get(action, block["element"].get("initial_value"))
                state[block["block_id"]] = {
                    action: {"type": block["element"]["type"], "value": value}
                }
        n = next(self._serial)
        payload = {
            "type": "view_submission",
            "team": {"id": TEAM, "domain": "fake"},
            "user": {"id": user, "username": user.lower(), "team_id": TEAM},
            "api_app_id": APP_ID,
            "token": "verification-token",
            "trigger_id": f"trigger-view-{n}",
            "view": {**view, "state": {"values": state}, "hash": f"h{n}", "team_id": TEAM},
            "response_urls": [],
        }
        return await self.send_envelope("interactive", payload)

    async def slash(
        self, text: str, *, user: str = ALICE, channel: str = CHANNEL, command: str = "/pi"
    ) -> Json:
        """A slash command typed in `channel` (Slack shows nobody its text)."""
        n = next(self._serial)
        self.triggers[f"trigger-cmd-{n}"] = time.monotonic()
        payload = {
            "token": "verification-token",
            "team_id": TEAM,
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": "general",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"{self.url}/commands/{n}",
            "trigger_id": f"trigger-cmd-{n}",
        }
        return await self.send_envelope("slash_commands", payload)

    async def send_envelope(
        self, kind: str, payload: Json, retry: int = 0, *, secret: str | None = None
    ) -> Json:
        """Deliver `payload` (Socket Mode, or HTTP signed with `secret` when given)."""
        envelope: Json = {
            "envelope_id": f"env-{next(self._serial)}",
            "type": kind,
            "accepts_response_payload": kind == "slash_commands",
            "retry_attempt": retry,
            "retry_reason": "timeout" if retry else "",
            "payload": payload,
        }
        if self.events_url:
            status, body = await self.post(kind, payload, retry, secret=secret)
            self.answers[envelope["envelope_id"]] = status
            if status == 200:
                if body.strip().startswith("{"):
                    self.acked_with[envelope["envelope_id"]] = json.loads(body)
                self.acks.append(envelope["envelope_id"])
            return envelope
        await self.connected()
        assert self._ws is not None
        await self._ws.send_json(envelope)
        return envelope

    async def redeliver(self, envelope: Json) -> Json:
        """Slack's retry: the same event (same event_id) in a new envelope."""
        return await self.send_envelope(
            envelope["type"], envelope["payload"], envelope["retry_attempt"] + 1
        )

    async def acked(self, envelope: Json) -> None:
        await self.wait_until(lambda: envelope["envelope_id"] in self.acks)

    # --- HTTP deliveries --------------------------------------------------------------

    async def post(
        self,
        kind: str,
        payload: Json,
        retry: int = 0,
        *,
        secret: str | None = None,
        stamp: float | None = None,
    ) -> tuple[int, str]:
        """POST one delivery to `events_url` as Slack does; (status, body), status 0
        when the app did not answer within Slack's 3 s."""
        if kind == "interactive":
            body = urlencode({"payload": json.dumps(payload)}).encode()
            content_type = "application/x-www-form-urlencoded"
        elif kind == "slash_commands":  # a command's fields are the form itself
            body = urlencode(payload).encode()
            content_type = "application/x-www-form-urlencoded"
        else:
            body = json.dumps(payload).encode()
            content_type = "application/json"
        headers = {
            "Content-Type": content_type,
            **signature(self.signing_secret if secret is None else secret, body, stamp),
        }
        if retry:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        timeout = aiohttp.ClientTimeout(total=ACK_WITHIN)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.post(self.events_url, data=body, headers=headers) as answer,
            ):
                return answer.status, await answer.text()
        except TimeoutError:
            return 0, ""

    async def verify_url(self) -> tuple[int, str]:
        """Slack's check of a new Request URL: the app must echo the challenge."""
        challenge = f"challenge-{next(self._serial)}"
        payload = {
            "token": "verification-token",
            "challenge": challenge,
            "type": "url_verification",
        }
        return await self.post("url_verification", payload)

    # --- the server ------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._ws = ws
        await ws.send_json({"type": "hello", "num_connections": 1})
        async for frame in ws:
            if frame.type == WSMsgType.TEXT:
                ack = json.loads(frame.data)
                envelope_id = ack.get("envelope_id")
                if envelope_id:
                    if ack.get("payload"):
                        self.acked_with[envelope_id] = ack["payload"]
                    self.acks.append(envelope_id)
        return ws

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _arguments(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        call = Call(method, args, token)
        self.calls.append(call)
        failure = self.failures.get(method)
        if failure is not None:
            failure.times -= 1
            if failure.times <= 0:
                del self.failures[method]
            headers = {"Retry-After": f"{failure.retry_after:g}"} if failure.retry_after else {}
            if failure.html:
                page = f"<html><body>{failure.error}</body></html>"
                return web.Response(text=page, status=failure.status, content_type="text/html")
            return web.json_response(
                {"ok": False, "error": failure.error}, status=failure.status, headers=headers
            )
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        refusal = self._streaming_refusal(method)
        if refusal is not None:
            return refusal
        wait = self._rate_limit(call) if self.enforce_limits else 0.0
        if wait > 0:
            self.limited.append(call)
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(math.ceil(wait))},
            )
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        result: Json = handler(args)
        # Slack reports the token's scopes on every Web API answer.
        headers = {"x-oauth-scopes": ",".join(self.scopes)}
        return web.json_response({"ok": "error" not in result, **result}, headers=headers)

    def _rate_limit(self, call: Call) -> float:
        """Seconds until `call` would be allowed (0: allowed, and counted)."""
        return self.rate_limits.wait(call.method, call.args, self.clock())

    async def _upload(self, request: web.Request) -> web.Response:
        self.uploads[request.match_info["file_id"]] = await request.read()
        return web.Response(text="OK")

    async def _file(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.downloads.append(name)
        if name in self.redirects:
            raise web.HTTPFound(self.redirects[name])
        found = self.files.get(name)
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}" or found is None:
            # Slack answers an unauthorised url_private fetch with its sign-in page.
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        if name in self.streams:
            return await self._stream(request, name, found[1])
        return web.Response(body=found[0], content_type=found[1])

    async def _stream(self, request: web.Request, name: str, mime: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": mime})
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk, self.streamed[name] = bytes(64 * 1024), 0
        try:
            while self.streamed[name] < self.streams[name]:
                await response.write(chunk)
                self.streamed[name] += len(chunk)
        except ConnectionError:  # the client hung up
            pass
        finally:
            self.streams_ended.add(name)
        return response

    # --- Web API methods ---------------------------------------------------------------

    def _m_auth_test(self, args: Json) -> Json:
        return {"team_id": TEAM, "team": "fake", "user_id": BOT_USER, "bot_id": BOT_ID, "url": ""}

    def _m_apps_connections_open(self, args: Json) -> Json:
        return {"url": f"ws://127.0.0.1:{self._port}/socket"}

    def _m_chat_postMessage(self, args: Json) -> Json:
        error = check_message(args)
        if error:
            return {"error": error}
        ts = self.new_ts()
        channel, thread = str(args["channel"]), args.get("thread_ts") or None
        blocks = blocks_of(args)
        text = str(args.get("text") or "")
        self.messages[ts] = Posted(channel, ts, text, blocks, thread, mentioned=mentions(args))
        self._clear_status(channel, thread)
        return {"channel": channel, "ts": ts, "message": {"ts": ts, "text": args.get("text")}}

    def _m_conversations_open(self, args: Json) -> Json:
        """The app's direct message with one person: Alice's is `DM_CHANNEL`, another
        person's `D` + their id without its `U`."""
        if "im:write" not in self.scopes:
            return {"error": "missing_scope", "needed": "im:write"}
        user = str(args.get("users") or "")
        if not user.startswith(("U", "W")) or "," in user:
            return {"error": "user_not_found"}
        return {"channel": {"id": DM_CHANNEL if user == ALICE else "D" + user[1:]}}

    def _m_chat_update(self, args: Json) -> Json:
        posted = self.messages.get(str(args.get("ts")))
        if posted is None or posted.deleted:
            return {"error": "message_not_found"}
        if posted.streaming:
            return {"error": "cant_update_message"}  # a stream changes by its own methods
        error = check_message(args)
        if error:
            return {"error": error}
        posted.text, posted.blocks = str(args.get("text") or ""), blocks_of(args)
        # An update replaces what the message shows, a streamed message's text included
        # (it is an ordinary message once its stream ended).
        posted.updated = True
        return {"channel": posted.channel, "ts": posted.ts}

    def _m_chat_delete(self, args: Json) -> Json:
        posted = self.messages.get(str(args.get("ts")))
        if posted is None or posted.deleted:
            return {"error": "message_not_found"}
        posted.deleted = True
        return {"channel": posted.channel, "ts": posted.ts}

    def _m_chat_postEphemeral(self, args: Json) -> Json:
        if not args.get("user") or not args.get("channel"):
            return {"error": "invalid_arguments"}
        return {"message_ts": self.new_ts()}

    def _m_reactions_add(self, args: Json) -> Json:
        found = self.reactions.setdefault(str(args.get("timestamp")), [])
        if str(args.get("name")) in found:
            return {"error": "already_reacted"}
        found.append(str(args.get("name")))
        return {}

    def _m_reactions_remove(self, args: Json) -> Json:
        found = self.reactions.get(str(args.get("timestamp")), [])
        if str(args.get("name")) not in found:
            return {"error": "no_reaction"}
        found.remove(str(args.get("name")))
        return {}

    def _m_views_open(self, args: Json) -> Json:
        issued = self.triggers.pop(str(args.get("trigger_id") or ""), None)
        if issued is None:
            return {"error": "invalid_trigger_id"}
        if time.monotonic() - issued > TRIGGER_LIFE:
            return {"error": "expired_trigger_id"}
        view = args.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        if not isinstance(view, dict) or not view_ok(view):
            return {"error": "invalid_arguments"}
        view_id = f"V{next(self._serial)}"
        self.views[view_id] = {**view, "id": view_id}
        return {"view": self.views[view_id]}

    def _m_usergroups_users_list(self, args: Json) -> Json:
        members = self.usergroups.get(str(args.get("usergroup")))
        return {"error": "no_such_subteam"} if members is None else {"users": list(members)}

    def _m_users_info(self, args: Json) -> Json:
        user = str(args.get("user"))
        return {"user": {"id": user, "name": user.lower(), "real_name": user}}

    def _m_files_getUploadURLExternal(self, args: Json) -> Json:
        file_id = f"F{next(self._serial)}"
        return {"upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, args: Json) -> Json:
        files = json.loads(str(args.get("files") or "[]"))
        if any(f["id"] not in self.uploads for f in files):
            return {"error": "file_not_found"}
        return {"files": [{"id": f["id"], "title": f.get("title")} for f in files]}

    def _m_files_delete(self, args: Json) -> Json:
        if self.uploads.pop(str(args.get("file")), None) is None:
            return {"error": "file_not_found"}
        return {}


def signature(secret: str, body: bytes, stamp: float | None = None) -> dict[str, str]:
    """Slack's request signing headers for `body` (v0: HMAC-SHA256 of "v0:ts:body")."""
    ts = str(int(time.time() if stamp is None else stamp))
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


async def _arguments(request: web.Request) -> Json:
    args: Json = dict(request.query)
    if request.content_type == "application/json":
        args.update(await request.json())
    elif request.can_read_body:
        args.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    return args

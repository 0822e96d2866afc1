"""A fake Telegram Bot API server on 127.0.0.1 for tests of the real python-telegram-bot.

PTB is pointed at it with ``Bot(token, base_url=fake.base_url, base_file_url=
fake.base_file_url)``. It keeps chats and messages, answers like the Bot API
(``{"ok": …, "result": …}``; errors with the real descriptions: "Bad Request:
message is not modified: …", "message is too long", "can't parse entities",
BUTTON_DATA_INVALID, 429 with ``parameters.retry_after``) and records every call.

getUpdates has the real semantics: updates stay until a later call's `offset`
passes them (that is the confirmation), and a call with `timeout` waits that long
for a new update. With `enforce_limits`, an edit of one private-chat message
within 1 s of the last, or a 21st message in a group within a minute, gets a 429.
sendMessageDraft shows a draft in a private chat (`drafts`, `draft_texts`, `shown_draft()`):
it lives 30 s after its last update or until the bot sends the chat a real message;
`refuse_drafts` makes it answer as for a bot or chat without drafts.
`fail()` makes the next call(s) of a method fail with a chosen error. The bot's
reactions are kept per message (`reactions`); chats in `reactions_off` refuse them. Once
setWebhook is called, `push()` POSTs the queued updates to the webhook instead.
A message records whether it notified (`notified`: sent without `disable_notification`;
an edit never notifies) and whom it mentions by id (`mentions`: text_mention entities and
`tg://user?id=` links), what a ping is made of.

Tests act as users with `message()`, `photo()` and `press()`, which queue real-
shaped updates, and wait with `wait_for()` / `bot_message()`; `raw()` queues an
update of any shape.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from tests.support.loopback import serve_on_loopback, until

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

TOKEN = "123456:TEST-fake-token"
SECRET = "s3cret-token_1"  # a webhook secret (Telegram allows A-Z, a-z, 0-9, _ and -)
BOT_USER = {"id": 123456, "is_bot": True, "first_name": "Pi", "username": "pi_test_bot"}
ALICE = {"id": 42, "is_bot": False, "first_name": "Alice", "username": "alice"}
MAX_TEXT = 4096
CLOUD_FILE_MAX = 20 * 2**20  # getFile refuses bigger files ("file is too big")
PHOTO_MAX = 10 * 2**20  # sendPhoto's limit (core.telegram.org/bots/api#sendphoto)
MAX_CALLBACK_DATA = 64
WAIT = 60.0  # the default wait for the bot: generous, a loaded 2-core CI machine
# Telegram's flood limits are approximate; the fake catches pacing bugs (edits every
# 0.2 s), not the scheduling jitter of a client that waits exactly the interval.
EDIT_INTERVAL = 1.0
JITTER = 0.05
# sendMessageDraft (core.telegram.org/bots/api#sendmessagedraft): "a temporary 30-second
# preview". Telegram documents no rate limit for drafts; with `enforce_limits` the fake
# allows a burst of 5 per chat refilled at 4 a second, so a bot updating a draft every
# ~0.25 s never hears 429 but one updating it per token does.
DRAFT_LIFE = 30.0
DRAFT_BURST = 5.0
DRAFT_RATE = 4.0
# Telegram documents no error texts for drafts. Bots streaming into groups report
# "Bad Request: TEXTDRAFT_PEER_INVALID" (docs/design.md, "Platform libraries";
# github.com/nullclaw/nullclaw/issues/626),
# and bots got the same before drafts were opened to every bot (PTB 22.7: "Now all bots
# can use this method"; github.com/yagop/node-telegram-bot-api/issues/1279). The
# draft_id text is the fake's own.
DRAFT_PEER_INVALID = "TEXTDRAFT_PEER_INVALID"
DRAFT_ID_INVALID = "draft_id must be a non-zero integer"

_INTS = {"chat_id", "message_id", "offset", "limit", "timeout", "message_thread_id", "draft_id"}
_JSON = {
    "disable_notification",
    "reply_markup",
    "commands",
    "allowed_updates",
    "entities",
    "caption_entities",
    "reaction",
}
# Emoji a message may be reacted with (Bot API `ReactionTypeEmoji`); a subset.
REACTION_EMOJI = frozenset("👍👎❤🔥🎉🤔😢🙏👌👀🤝✍🆒💯⚡🏆")
_COMMAND = re.compile(r"/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?")
_MENTION = re.compile(r"(?<!\w)@[A-Za-z0-9_]{3,}")
_RESERVED = set("_*[]()~`>#+-=|{}.!")  # must be escaped in MarkdownV2 outside code


class ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after


def bad_request(what: str) -> ApiError:
    return ApiError(400, f"Bad Request: {what}")


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float  # the fake's clock (time.monotonic by default) when the request arrived
    ok: bool = True  # False once the call was answered with an error


@dataclass
class Message:
    chat_id: int
    message_id: int
    text: str  # as the user sees it (MarkdownV2 markers and escapes removed)
    raw: str = ""  # as the bot sent it
    parse_mode: str | None = None
    reply_markup: dict[str, Any] | None = None
    thread_id: int | None = None
    sender: dict[str, Any] = field(default_factory=lambda: BOT_USER)
    document: bytes | None = None
    filename: str = ""
    photo: bytes | None = None  # as the bot sent it (Telegram would re-encode it)
    deleted: bool = False
    edited_at: list[float] = field(default_factory=list)
    notified: bool = True  # sent without `disable_notification`
    mentions: list[int] = field(default_factory=list)  # user ids mentioned by id

    @property
    def buttons(self) -> list[tuple[str, str]]:
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [(b["text"], b.get("callback_data", "")) for row in rows for b in row]

    def json(self) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": self.chat_id, "type": "private", "first_name": "Alice"}
        if self.chat_id < 0:
            chat = {"id": self.chat_id, "type": "supergroup", "title": "Team"}
            if self.thread_id is not None:
                chat["is_forum"] = True
        out: dict[str, Any] = {
            "message_id": self.message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": self.sender,
        }
        if self.document is not None:
            out["document"] = {
                "file_id": f"doc{self.message_id}",
                "file_unique_id": "u",
                "file_name": self.filename,
            }
            if self.text:
                out["caption"] = self.text
        elif self.photo is not None:
            size = {"file_id": f"ph{self.message_id}", "file_unique_id": "p", "width": 1}
            out["photo"] = [{**size, "height": 1}]
            if self.text:
                out["caption"] = self.text
        elif self.text:
            out["text"] = self.text
        if self.reply_markup and "inline_keyboard" in self.reply_markup:
            out["reply_markup"] = self.reply_markup
        if self.thread_id is not None:
            out["message_thread_id"], out["is_topic_message"] = self.thread_id, True
        return out


@dataclass
class Draft:
    """The draft a private chat shows while the bot streams (sendMessageDraft)."""

    draft_id: int
    text: str  # as the user sees it (MarkdownV2 markers and escapes removed)
    at: float  # the fake's clock at its last update
    thread_id: int | None = None
    dismissed: bool = False  # a real message from the bot took its place


class FakeTelegram:
    def __init__(
        self,
        token: str = TOKEN,
        *,
        enforce_limits: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self.enforce_limits = enforce_limits
        self.clock = clock
        self.calls: list[Call] = []
        self.errors: list[tuple[str, str]] = []  # (method, description) of every error answer
        self.messages: dict[tuple[int, int], Message] = {}
        self.updates: list[dict[str, Any]] = []
        self.confirmed = 0  # the highest offset a getUpdates call has passed
        self.handed: dict[int, int] = {}  # update_id → how often getUpdates handed it out
        self.answers: dict[str, tuple[str, bool]] = {}  # query id → (text, alert)
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id → (file_path, data)
        # File downloads: how long each takes, and the file paths asked for, in order
        # (with a "done:" entry when one has been answered).
        self.file_delay = 0.0
        self.downloads: list[str] = []
        self.announced_size: int | None = None  # a photo's file_size, if not its real one
        # A file server that lies: every file is this many bytes, sent without a length,
        # and `streamed` counts the bytes written before the client hung up.
        self.stream_bytes: int | None = None
        self.cut_after: int | None = None  # a file download ends after these bytes
        self.streamed = 0
        self.stream_ended = asyncio.Event()
        self.webhook = ""  # the URL setWebhook set; getUpdates then answers 409
        self.webhook_secret = ""
        self.webhook_updates: list[str] = []  # its allowed_updates
        self.commands: list[dict[str, str]] = []
        self.reactions: dict[tuple[int, int], list[str]] = {}  # (chat, message) → the bot's
        self.reactions_off: set[int] = set()  # chats that allow no reactions
        self.drafts: dict[int, Draft] = {}  # chat → its latest draft (shown or not)
        self.draft_texts: dict[int, list[str]] = {}  # chat → every draft text, in order
        self.draft_life = DRAFT_LIFE
        self.refuse_drafts: bool | set[int] = False  # True: every chat; a set: those chats
        self._draft_buckets: dict[int, tuple[float, float]] = {}  # chat → (tokens, at)
        self._failures: dict[str, list[ApiError]] = {}
        self._queries: set[str] = set()
        self._ids: dict[int, itertools.count[int]] = {}
        self._update_ids = itertools.count(1)
        self._group_sends: dict[int, list[float]] = {}
        self._new_update = asyncio.Event()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True  # pending long polls answer now, so the server closes at once
        self._new_update.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # --- scripting --------------------------------------------------------------------

    def fail(
        self,
        method: str,
        description: str,
        *,
        status: int = 400,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` calls of `method` fail with this error."""
        errors = self._failures.setdefault(method, [])
        errors.extend(ApiError(status, description, retry_after) for _ in range(times))

    def message(
        self,
        chat_id: int,
        text: str,
        *,
        user: dict[str, Any] = ALICE,
        thread_id: int | None = None,
        reply_to: int | None = None,
        edit_of: int | None = None,
        photo: bytes | None = None,
        document: tuple[str, bytes, str] | None = None,
        voice: bytes | None = None,
    ) -> Message:
        """A user's message (or, with `edit_of`, an edit of one) queued as an update;
        `document` is (file name, bytes, MIME type) of a file sent with it."""
        message_id = edit_of if edit_of is not None else self._next_id(chat_id)
        shown = Message(chat_id, message_id, text, text, thread_id=thread_id, sender=user)
        self.messages[(chat_id, message_id)] = shown
        body = shown.json()
        text_field, entities_field = (
            ("caption", "caption_entities") if photo or document or voice else ("text", "entities")
        )
        body.pop("text", None)
        if text:
            body[text_field] = text
        if entities := _entities(text):
            body[entities_field] = entities
        if photo is not None:
            body["photo"] = self._photo_sizes(photo)
        if document is not None:
            body["document"] = self._document(*document)
        if voice is not None:
            voice_note = self._document("", voice, "audio/ogg")
            voice_note.pop("file_name")  # voice notes carry none
            body["voice"] = {**voice_note, "duration": 2}
        if reply_to is not None:
            body["reply_to_message"] = self.messages[(chat_id, reply_to)].json()
        if edit_of is not None:
            body["edit_date"] = int(time.time())
        self._queue({"edited_message" if edit_of is not None else "message": body})
        return shown

    def raw(self, update: dict[str, Any]) -> int:
        """`update` (without its update_id) queued as it is, whatever its shape: one a
        client library may fail to decode. Returns its update_id."""
        self._queue(update)
        return int(self.updates[-1]["update_id"])

    def press(
        self, chat_id: int, message_id: int, data: str, *, user: dict[str, Any] = ALICE
    ) -> str:
        """A press on an inline button; returns the callback query id."""
        query_id = f"q{len(self._queries) + 1}"
        self._queries.add(query_id)
        message = self.messages[(chat_id, message_id)].json()
        self._queue(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user,
                    "chat_instance": "ci",
                    "message": message,
                    "data": data,
                }
            }
        )
        return query_id

    async def push(self, secret: str | None = None) -> list[int]:
        """POST the queued updates to the webhook one by one, as Telegram does, with
        the secret setWebhook gave (or `secret`; "" sends no header). Returns the
        answers' statuses; an update answered 200 leaves the queue."""
        headers = {"Content-Type": "application/json"}
        token = self.webhook_secret if secret is None else secret
        if token:
            headers["X-Telegram-Bot-Api-Secret-Token"] = token
        statuses = []
        async with aiohttp.ClientSession() as session:  # trust_env off: no proxy
            for update in list(self.updates):
                body = json.dumps(update)
                async with session.post(self.webhook, data=body, headers=headers) as answer:
                    statuses.append(answer.status)
                if answer.status == 200:
                    self.updates.remove(update)
        return statuses

    def add_file(self, file_id: str, data: bytes, path: str = "") -> None:
        self.files[file_id] = (path or f"photos/{file_id}.jpg", data)

    # --- observing ----------------------------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def bot_messages(self, chat_id: int | None = None) -> list[Message]:
        return [
            m
            for m in self.messages.values()
            if m.sender is BOT_USER and not m.deleted and chat_id in (None, m.chat_id)
        ]

    def shown_draft(self, chat_id: int) -> Draft | None:
        """The draft the chat shows now: none once it is 30 s old or was dismissed."""
        draft = self.drafts.get(chat_id)
        if draft is None or draft.dismissed or self.clock() - draft.at >= self.draft_life:
            return None
        return draft

    def find(self, contains: str, chat_id: int | None = None) -> Message | None:
        return next((m for m in reversed(self.bot_messages(chat_id)) if contains in m.text), None)

    async def wait_for(self, predicate: Callable[[], object], within: float = WAIT) -> None:
        await until(predicate, within)

    async def bot_message(
        self, contains: str, chat_id: int | None = None, within: float = WAIT
    ) -> Message:
        """The newest live bot message containing `contains`, once there is one."""
        await self.wait_for(lambda: self.find(contains, chat_id), within)
        found = self.find(contains, chat_id)
        assert found is not None
        return found

    # --- HTTP ------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _reply({"ok": False, "error_code": 401, "description": "Unauthorized"}, 401)
        method = request.match_info["method"]
        params = await _params(request)
        call = Call(method, params, self.clock())
        self.calls.append(call)
        handler = getattr(self, f"_m_{method}", None)
        try:
            if handler is None:
                raise ApiError(404, "Not Found")
            if pending := self._failures.get(method):
                raise pending.pop(0)
            result = await handler(params)
        except ApiError as exc:
            call.ok = False
            self.errors.append((method, exc.description))
            body: dict[str, Any] = {
                "ok": False,
                "error_code": exc.status,
                "description": exc.description,
            }
            if exc.retry_after is not None:
                body["parameters"] = {"retry_after": exc.retry_after}
            return _reply(body, exc.status)
        return _reply({"ok": True, "result": result})

    async def _file(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        self.downloads.append(path)
        if self.stream_bytes is not None:
            await asyncio.sleep(self.file_delay)
            return await self._stream(request, self.stream_bytes)
        for file_path, data in self.files.values():
            if file_path == path and request.match_info["token"] == self.token:
                if self.cut_after is not None:
                    await asyncio.sleep(self.file_delay)
                    return await self._cut(request, data, self.cut_after)
                if self.file_delay:
                    return await self._trickle(request, data, path)
                self.downloads.append(f"done:{path}")
                return web.Response(body=data, content_type="application/octet-stream")
        await asyncio.sleep(self.file_delay)
        return web.Response(status=404)

    async def _trickle(self, request: web.Request, data: bytes, path: str) -> web.StreamResponse:
        """A slow download that is still alive: a byte at a time over `file_delay`
        seconds, never silent for a second (a client's read timeout is 5 s)."""
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(data)
        await response.prepare(request)
        steps = max(1, math.ceil(self.file_delay))
        pieces = [data[i * len(data) // steps : (i + 1) * len(data) // steps] for i in range(steps)]
        for piece in pieces:
            await asyncio.sleep(self.file_delay / steps)
            await response.write(piece)
        self.downloads.append(f"done:{path}")
        await response.write_eof()
        return response

    async def _cut(self, request: web.Request, data: bytes, cut: int) -> web.StreamResponse:
        """The download's first `cut` bytes of an announced whole, then a hang-up."""
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[:cut])
        if request.transport is not None:
            request.transport.close()
        return response

    async def _stream(self, request: web.Request, size: int) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = bytes(64 * 1024)
        try:
            while self.streamed < size:
                await response.write(chunk)
                self.streamed += len(chunk)
        except ConnectionError:  # the client hung up
            pass
        finally:
            self.stream_ended.set()
        return response

    # --- methods (each `_m_<name>` answers Bot API method <name>) ---------------------------

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return {
            **BOT_USER,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = int(params.get("offset") or 0)
        if offset:
            self.confirmed = max(self.confirmed, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        deadline = self.clock() + float(params.get("timeout") or 0)
        while not self.updates and not self._closing and (remaining := deadline - self.clock()) > 0:
            self._new_update.clear()
            try:
                await asyncio.wait_for(self._new_update.wait(), remaining)
            except TimeoutError:
                break
        handed = self.updates[: int(params.get("limit") or 100)]
        for update in handed:
            self.handed[update["update_id"]] = self.handed.get(update["update_id"], 0) + 1
        return handed

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        text, raw = _shown(params), str(params.get("text", ""))
        markup = _check_markup(params.get("reply_markup"))
        self._pace_group(chat_id)
        message = Message(
            chat_id,
            self._next_id(chat_id),
            text,
            raw,
            params.get("parse_mode"),
            markup,
            params.get("message_thread_id"),
            notified=not params.get("disable_notification"),
            mentions=_mentions(params),
        )
        self.messages[(chat_id, message.message_id)] = message
        self._dismiss_draft(chat_id)
        return message.json()

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> Any:
        chat_id, draft_id = int(params["chat_id"]), params.get("draft_id")
        refused = self.refuse_drafts
        if chat_id <= 0 or refused is True or (isinstance(refused, set) and chat_id in refused):
            raise bad_request(DRAFT_PEER_INVALID)  # drafts are for private chats only
        if not isinstance(draft_id, int) or draft_id == 0:
            raise bad_request(DRAFT_ID_INVALID)
        text = _shown(params, empty_ok=True)  # empty: the "Thinking…" placeholder
        self._pace_draft(chat_id)
        thread = params.get("message_thread_id")
        self.drafts[chat_id] = Draft(draft_id, text, self.clock(), thread)
        self.draft_texts.setdefault(chat_id, []).append(text)
        return True

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        message = self._existing(params, "edit")
        text, raw = _shown(params), str(params.get("text", ""))
        markup = _check_markup(params.get("reply_markup"))
        if raw == message.raw and markup == message.reply_markup:
            raise _not_modified()
        self._pace_edit(message)
        message.text, message.raw, message.reply_markup = text, raw, markup
        message.parse_mode = params.get("parse_mode")
        return message.json()

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        message = self._existing(params, "edit")
        markup = _check_markup(params.get("reply_markup"))
        if markup == message.reply_markup:
            raise _not_modified()
        self._pace_edit(message)
        message.reply_markup = markup
        return message.json()

    async def _m_deleteMessage(self, params: dict[str, Any]) -> Any:
        self._existing(params, "delete").deleted = True
        return True

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        query_id = str(params["callback_query_id"])
        if query_id not in self._queries or query_id in self.answers:
            raise bad_request(
                "query is too old and response timeout expired or query ID is invalid"
            )
        self.answers[query_id] = (str(params.get("text") or ""), params.get("show_alert") == "true")
        return True

    async def _m_setMessageReaction(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if key not in self.messages or self.messages[key].deleted:
            raise bad_request("message to react not found")
        reaction = params.get("reaction") or []
        emoji = [r["emoji"] for r in reaction if r.get("type") == "emoji"]
        if any(e not in REACTION_EMOJI for e in emoji) or len(emoji) > 1:
            raise bad_request("REACTION_INVALID")
        if key[0] in self.reactions_off:
            raise bad_request("REACTION_INVALID")
        self.reactions[key] = emoji  # a bot's reactions replace its earlier ones
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_sendDocument(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        document = params.get("document")
        if not isinstance(document, web.FileField):
            raise bad_request("there is no document in the request")
        return self._file_message(
            chat_id, params, document=document.file.read(), filename=document.filename
        )

    async def _m_sendPhoto(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        photo = params.get("photo")
        if not isinstance(photo, web.FileField):
            raise bad_request("there is no photo in the request")
        data = photo.file.read()
        if len(data) > PHOTO_MAX:
            raise bad_request("PHOTO_SAVE_FILE_INVALID")
        if not data.startswith((b"\x89PNG", b"\xff\xd8", b"RIFF")):
            raise bad_request("IMAGE_PROCESS_FAILED")
        return self._file_message(chat_id, params, photo=data)

    def _file_message(self, chat_id: int, params: dict[str, Any], **content: Any) -> Any:
        """The bot's message carrying a file (`content`: Message's fields), its caption
        from `params`: counted against a group's message rate, and ending the chat's draft."""
        self._pace_group(chat_id)
        message = Message(
            chat_id,
            self._next_id(chat_id),
            str(params.get("caption") or ""),
            thread_id=params.get("message_thread_id"),
            notified=not params.get("disable_notification"),
            **content,
        )
        self.messages[(chat_id, message.message_id)] = message
        self._dismiss_draft(chat_id)
        return message.json()

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params["file_id"])
        if file_id not in self.files:
            raise bad_request("invalid file_id")
        path, data = self.files[file_id]
        if len(data) > CLOUD_FILE_MAX:
            raise bad_request("file is too big")  # the cloud Bot API's 20 MB rule
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    async def _m_setMyCommands(self, params: dict[str, Any]) -> Any:
        self.commands = list(params.get("commands") or [])
        return True

    async def _m_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = str(params.get("url") or "")
        self.webhook_secret = str(params.get("secret_token") or "")
        self.webhook_updates = list(params.get("allowed_updates") or [])
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = ""
        if params.get("drop_pending_updates") == "true":
            self.updates.clear()
        return True

    # --- internals -----------------------------------------------------------------------------

    def _queue(self, update: dict[str, Any]) -> None:
        self.updates.append({"update_id": next(self._update_ids), **update})
        self._new_update.set()

    def _next_id(self, chat_id: int) -> int:
        return next(self._ids.setdefault(chat_id, itertools.count(1)))

    def _document(self, name: str, data: bytes, mime: str) -> dict[str, Any]:
        file_id = f"doc{len(self.files) + 1}"
        self.add_file(file_id, data, f"documents/{file_id}")
        size = len(data) if self.announced_size is None else self.announced_size
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_name": name,
            "mime_type": mime,
            "file_size": size,
        }

    def _photo_sizes(self, data: bytes) -> list[dict[str, Any]]:
        number = len(self.files) + 1
        sizes = []
        for size, width in (("s", 90), ("m", 320), ("x", 1280)):
            file_id = f"photo{number}{size}"
            self.add_file(file_id, data if size == "x" else b"thumbnail")
            sizes.append(
                {
                    "file_id": file_id,
                    "file_unique_id": f"u{file_id}",
                    "width": width,
                    "height": width * 3 // 4,
                    "file_size": len(data) if self.announced_size is None else self.announced_size,
                }
            )
        return sizes

    def _existing(self, params: dict[str, Any], action: str) -> Message:
        key = (int(params["chat_id"]), int(params["message_id"]))
        message = self.messages.get(key)
        if message is None or message.deleted:
            raise bad_request(f"message to {action} not found")
        return message

    def _pace_edit(self, message: Message) -> None:
        now = self.clock()
        if self.enforce_limits and message.chat_id > 0 and message.edited_at:
            waited = now - message.edited_at[-1]
            if waited < EDIT_INTERVAL - JITTER:
                raise _too_many(math.ceil(EDIT_INTERVAL - waited))
        message.edited_at.append(now)
        self._pace_group(message.chat_id)

    def _pace_draft(self, chat_id: int) -> None:
        if not self.enforce_limits:
            return
        now = self.clock()
        tokens, then = self._draft_buckets.get(chat_id, (DRAFT_BURST, now))
        tokens = min(DRAFT_BURST, tokens + (now - then) * DRAFT_RATE)
        if tokens < 1:
            self._draft_buckets[chat_id] = (tokens, now)
            raise _too_many(math.ceil((1 - tokens) / DRAFT_RATE))
        self._draft_buckets[chat_id] = (tokens - 1, now)

    def _dismiss_draft(self, chat_id: int) -> None:
        """A real message from the bot removes the chat's draft (a draft is a preview)."""
        if chat_id in self.drafts:
            self.drafts[chat_id].dismissed = True

    def _pace_group(self, chat_id: int) -> None:
        if chat_id > 0:
            return
        now = self.clock()
        recent = [t for t in self._group_sends.get(chat_id, []) if now - t < 60.0]
        if self.enforce_limits and len(recent) >= 20:
            raise _too_many(math.ceil(60.0 - (now - recent[0])))
        self._group_sends[chat_id] = [*recent, now]


def _too_many(seconds: int) -> ApiError:
    seconds = max(1, seconds)
    return ApiError(429, f"Too Many Requests: retry after {seconds}", retry_after=seconds)


def _not_modified() -> ApiError:
    return bad_request(
        "message is not modified: specified new message content and reply markup are exactly "
        "the same as a current content and reply markup of the message"
    )


def _reply(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


async def _params(request: web.Request) -> dict[str, Any]:
    """Bot API parameters from a query string, a form, multipart or JSON body."""
    if request.content_type == "application/json":
        return dict(await request.json())
    raw: dict[str, Any] = dict(request.query)
    raw.update(await request.post())
    params: dict[str, Any] = {}
    for name, value in raw.items():
        if name in _INTS and isinstance(value, str) and value.lstrip("-").isdigit():
            params[name] = int(value)
        elif name in _JSON and isinstance(value, str):
            params[name] = json.loads(value)
        else:
            params[name] = value
    return params


def _check_markup(markup: dict[str, Any] | None) -> dict[str, Any] | None:
    for row in (markup or {}).get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(data.encode()) <= MAX_CALLBACK_DATA:
                raise bad_request("BUTTON_DATA_INVALID")
    return markup or None


def _mentions(params: dict[str, Any]) -> list[int]:
    """The users a sent text mentions by id: its text_mention entities, or the
    `tg://user?id=` links of its MarkdownV2."""
    entities = params.get("entities") or []
    if isinstance(entities, str):
        entities = json.loads(entities)
    found = [int(e["user"]["id"]) for e in entities if e.get("type") == "text_mention"]
    if params.get("parse_mode") == "MarkdownV2":
        found += [int(m) for m in re.findall(r"\]\(tg://user\?id=(\d+)\)", str(params["text"]))]
    return found


def _shown(params: dict[str, Any], *, empty_ok: bool = False) -> str:
    """The text a user would see, after the parse-mode checks Telegram makes."""
    raw = str(params.get("text", ""))
    text = raw
    if params.get("parse_mode") == "MarkdownV2":
        text = _unmark_v2(raw)
    if not text.strip() and not empty_ok:
        raise bad_request("message text is empty")
    if len(text.encode("utf-16-le")) // 2 > MAX_TEXT:
        raise bad_request("message is too long")
    return text


def _unmark_v2(raw: str) -> str:
    """MarkdownV2 → visible text; raises "can't parse entities" like Telegram.

    Strict as the Bot API documents it: outside code every one of `_*[]()~`>#+-=|{}.!`
    is either escaped or a marker of a well-formed entity (*bold*, _italic_,
    __underline__, ~strike~, ||spoiler||, [text](url), `code`, ```pre```, > at a
    line's start); an entity left open is an error, as is a lone `|` or a `]`, `(` or
    `)` outside a link.
    """
    out: list[str] = []
    open_: list[str] = []  # the entities open, innermost last
    i = 0
    while i < len(raw):
        i = _read_v2(raw, i, out, open_)
    if open_:
        raise bad_request(f"can't parse entities: can't find end of the entity {open_[-1]!r}")
    return "".join(out)


def _read_v2(raw: str, i: int, out: list[str], open_: list[str]) -> int:
    """Read what starts at `i` (an escape, code, an entity's marker, a character) into
    `out` and `open_`; the index after it."""
    char = raw[i]
    if char == "\\" and i + 1 < len(raw):
        out.append(raw[i + 1])
        return i + 2
    if raw.startswith("```", i):
        return _code_end(raw, _line_end(raw, i + 3), "```", out)
    if char == "`":
        return _code_end(raw, i + 1, "`", out)
    if char in "*~_" or raw.startswith("||", i):
        marker = raw[i : i + 2] if raw.startswith(("__", "||"), i) else char
        _toggle(open_, marker)
        return i + len(marker)
    if char == "[":
        open_.append("[")
        return i + 1
    if char == "]" and open_ and open_[-1] == "[" and raw.startswith("](", i):
        open_.pop()
        return _link_end(raw, i + 2)
    if char == ">" and (i == 0 or raw[i - 1] == "\n"):
        return i + 1  # a quote
    if char in _RESERVED:
        raise bad_request(
            f"can't parse entities: Character '{char}' is reserved and must be escaped "
            "with the preceding '\\'"
        )
    out.append(char)
    return i + 1


def _toggle(open_: list[str], marker: str) -> None:
    """Close `marker`'s entity if it is the innermost one open, else open it."""
    if open_ and open_[-1] == marker:
        open_.pop()
    elif marker in open_:  # closing an outer entity across an inner one
        raise bad_request(f"can't parse entities: can't find end of the entity {open_[-1]!r}")
    else:
        open_.append(marker)


def _line_end(raw: str, i: int) -> int:
    """After a pre block's opening fence: skip its info string (the language)."""
    end = raw.find("\n", i)
    return end + 1 if end != -1 else len(raw)


def _code_end(raw: str, i: int, fence: str, out: list[str]) -> int:
    """Copy code from `i` to its closing `fence` into `out`; the index after the fence.
    Inside code only backquote and backslash are escaped."""
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        elif raw.startswith(fence, i):
            return i + len(fence)
        elif raw[i] == "`":
            raise bad_request("can't parse entities: can't find end of the entity '`'")
        else:
            out.append(raw[i])
            i += 1
    raise bad_request(f"can't parse entities: can't find end of the entity {fence!r}")


def _link_end(raw: str, i: int) -> int:
    """The index after the ")" that closes a link URL starting at `i`."""
    while i < len(raw) and raw[i] != ")":
        i += 2 if raw[i] == "\\" else 1
    if i >= len(raw):
        raise bad_request("can't parse entities: can't find end of a url")
    return i + 1


def _entities(text: str) -> list[dict[str, Any]]:
    """bot_command and mention entities as Telegram adds them (UTF-16 offsets)."""
    found = []
    command = _COMMAND.match(text)
    if command is not None:
        found.append(("bot_command", 0, command.end()))
    found += [("mention", m.start(), m.end()) for m in _MENTION.finditer(text)]
    return [
        {"type": kind, "offset": _units(text[:start]), "length": _units(text[start:end])}
        for kind, start, end in found
    ]


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2

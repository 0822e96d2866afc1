"""A worker's side of its platform calls: `RemoteAdapter`, whose calls a frontend
makes (`calls.py`), and `CallLink`, which sends them and reads their answers.

The worker's outbox is the ordinary one; only its adapter is remote. A call waits
`CALL_TIMEOUT` for its answer, then is a `TransientError` to the outbox (which
retries); a frontend never makes a call past its deadline, so the retry is never a
second copy. Every call names its conversation (`bridge.outbox.calls.CALLING`) and
this worker's fencing token for it, which the frontend checks.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

import anyio
from redis.exceptions import RedisError

from bridge.model import ChatRef, MessageRef, PlatformError, TransientError
from bridge.outbox.calls import CALLING
from bridge.outbox.drafts import Drafting
from bridge.outbox.streams import Streaming
from bridge.scale.calls import BLOCK_MS, CALL_TIMEOUT, STREAM_CAP, calls_stream
from bridge.scale.groups import Backoff
from bridge.scale.wire import Answer, Call, Fenced, raise_for

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import redis.asyncio as aioredis
    from anyio.abc import TaskStatus

    from bridge.model import Adapter, Keyboard, Markup, PlatformLimits, ReactionState, Task
    from bridge.scale.stats import ScaleStats

log = logging.getLogger(__name__)


def replies_stream(prefix: str, instance: str) -> str:
    return f"{prefix}replies:{instance}"


class CallLink:
    """A worker's side of the call streams: send a call, wait for its answer."""

    def __init__(
        self, client: aioredis.Redis, prefix: str, instance: str, stats: ScaleStats
    ) -> None:
        self._redis = client
        self._prefix = prefix
        self._replies = replies_stream(prefix, instance)
        self._stats = stats
        self._waiting: dict[str, tuple[anyio.Event, list[Answer]]] = {}

    async def call(self, platform: str, call: Call) -> Answer:
        done, box = anyio.Event(), list[Answer]()
        self._waiting[call.id] = (done, box)
        started = time.monotonic()
        try:
            fields: Any = {"c": call.model_dump_json(), "r": self._replies}
            try:
                await self._redis.xadd(
                    calls_stream(self._prefix, platform), fields, maxlen=STREAM_CAP
                )
            except RedisError as exc:
                self._stats.redis_errors += 1
                raise TransientError(f"Redis: {exc}") from None
            with anyio.move_on_after(CALL_TIMEOUT):
                await done.wait()
            if not box:
                raise TransientError(f"no frontend answered in {CALL_TIMEOUT:g} s")
            self._stats.call_seconds.observe(time.monotonic() - started)
            answer: Answer = box[0]
            return answer
        finally:
            self._waiting.pop(call.id, None)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read the answers for this worker until cancelled."""
        # From the start, not "$": an answer added while this reads nothing yet (or
        # reconnects) would be missed. The stream is this instance's own and trimmed
        # as it is read, so its start is what is unread.
        last = "0-0"
        task_status.started()
        backoff = Backoff()
        while True:
            try:
                found: Any = await self._redis.xread(
                    {self._replies: last}, count=200, block=BLOCK_MS
                )
            except RedisError as exc:
                self._stats.redis_errors += 1
                log.warning(
                    "reading call answers failed (%s); retrying in %.1f s", exc, backoff.delay
                )
                await backoff.wait()
                continue
            backoff.reset()
            for _stream, entries in found or ():
                for entry_id, fields in entries:
                    last = entry_id
                    self._answered(fields.get("a", ""))
                if entries:
                    await _quietly(self._redis.xtrim(self._replies, minid=last))

    def _answered(self, raw: str) -> None:
        try:
            answer = Answer.model_validate_json(raw)
        except ValueError:
            log.warning("an unreadable call answer was dropped")
            return
        waiting = self._waiting.get(answer.id)
        if waiting is not None:
            waiting[1].append(answer)
            waiting[0].set()


class RemoteAdapter:
    """`Adapter` (with streams, drafts and direct messages) whose calls a frontend
    makes; what needs no platform (limits, formatting, which chats stream) is the
    local adapter's."""

    def __init__(
        self,
        local: Adapter,
        link: CallLink,
        platform: str,
        fence: Callable[[str], int],
    ) -> None:
        self._local = local
        self._link = link
        self._platform = platform
        self._fence = fence  # conversation key → this worker's token for it (0: none)

    @property
    def limits(self) -> PlatformLimits:
        return self._local.limits

    def format(self, markdown: str, limit: int) -> list[str]:
        return self._local.format(markdown, limit)

    def streams_in(self, chat: ChatRef) -> bool:
        local = self._local
        return isinstance(local, Streaming) and local.streams_in(chat)

    def drafts_in(self, chat: ChatRef) -> bool:
        local = self._local
        return isinstance(local, Drafting) and local.drafts_in(chat)

    async def _call(self, method: Any, **args: Any) -> Answer:
        key = CALLING.get()
        fence = self._fence(key) if key else 0
        if key and fence == 0:
            raise Fenced(f"{key} is not this worker's")
        call = Call(
            id=secrets.token_hex(8),
            method=method,
            key=key,
            fence=fence,
            deadline=time.time() + CALL_TIMEOUT,
            **args,
        )
        answer = await self._link.call(self._platform, call)
        raise_for(answer)
        return answer

    async def _ref(self, method: Any, **args: Any) -> MessageRef:
        answer = await self._call(method, **args)
        if answer.ref is None:
            raise PlatformError(f"{method}: the frontend's answer has no message")
        return answer.ref

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        markup: Markup = "plain",
        buttons: Keyboard = (),
        force_reply: bool = False,
        silent: bool = False,
    ) -> MessageRef:
        return await self._ref(
            "send",
            chat=chat,
            text=text,
            markup=markup,
            buttons=buttons,
            force_reply=force_reply,
            silent=silent,
        )

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        await self._call("edit", ref=ref, text=text, markup=markup, buttons=buttons)

    async def delete(self, ref: MessageRef) -> None:
        await self._call("delete", ref=ref)

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        return await self._ref("upload", chat=chat, filename=filename, data=data, text=caption)

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        await self._call("answer_press", press_id=press_id, text=text, alert=alert)

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        await self._call("react", chat=chat, message_id=message_id, state=state)

    async def start_stream(
        self, chat: ChatRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> MessageRef:
        return await self._ref("start_stream", chat=chat, text=markdown, tasks=tuple(tasks))

    async def append_stream(
        self, ref: MessageRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> None:
        await self._call("append_stream", ref=ref, text=markdown, tasks=tuple(tasks))

    async def stop_stream(self, ref: MessageRef, markdown: str) -> None:
        await self._call("stop_stream", ref=ref, text=markdown)

    async def set_status(self, chat: ChatRef, text: str) -> None:
        await self._call("set_status", chat=chat, text=text)

    async def draft(
        self, chat: ChatRef, draft_id: int, text: str, *, markup: Markup = "plain"
    ) -> None:
        await self._call("draft", chat=chat, draft_id=draft_id, text=text, markup=markup)

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        return (await self._call("direct_chat", user_id=user_id)).chat


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(RedisError):
        await awaitable

"""A worker's side of its platform calls: `RemoteAdapter`, whose calls a frontend
makes (`calls.py`), and `CallLink`, which sends them and reads their answers.

The worker's outbox is the ordinary one; only its adapter is remote. `RemoteAdapter`
is the platform interface (`bridge.platform`) as its table lists it: each member
that is a call becomes a `PlatformCall` a frontend makes, each member answered
locally is the local adapter's (a copy of the platform's own adapter that never
connects), and whether a chat streams or drafts is the local adapter's answer when
`isinstance` finds it has the capability. A call waits `CALL_TIMEOUT` for its
answer, then is a `TransientError` to the outbox (which retries); a frontend never
makes a call past its deadline, so the retry is never a second copy. Every call
names its conversation (`bridge.outbox.calls.CALLING`) and this worker's fencing
token for it, which the frontend checks.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

import anyio
from redis.exceptions import RedisError

from bridge.backoff import Retries
from bridge.outbox.calls import CALLING, SHOWING
from bridge.platform import (
    Drafting,
    PlatformCall,
    PlatformError,
    Streaming,
    TransientError,
)
from bridge.scale.calls import ANSWER_GRACE, BLOCK_MS, CALL_TIMEOUT, STREAM_CAP, calls_stream
from bridge.scale.groups import REDIS_BACKOFF
from bridge.scale.wire import Answer, Call, Fenced, carried, raise_for

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import redis.asyncio as aioredis
    from anyio.abc import TaskStatus

    from bridge.model import (
        ChatRef,
        Keyboard,
        Markup,
        Mention,
        MessageRef,
        PlatformLimits,
        ReactionState,
        Task,
    )
    from bridge.platform import Adapter
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
            deadline = call.deadline or time.time() + CALL_TIMEOUT
            await self._send(platform, call, deadline)
            log.debug("call %s (%s) for %s: sent", call.id, call.method, call.key)
            with anyio.move_on_after(deadline + ANSWER_GRACE - time.time()):
                await done.wait()
            if not box:
                log.warning(
                    "call %s (%s) for %s: no answer by its deadline", call.id, call.method, call.key
                )
                raise TransientError(f"no frontend answered in {CALL_TIMEOUT:g} s")
            self._stats.call_seconds.observe(time.monotonic() - started)
            answer: Answer = box[0]
            return answer
        finally:
            self._waiting.pop(call.id, None)

    async def _send(self, platform: str, call: Call, deadline: float) -> None:
        """Onto the platform's call stream, through a Redis restart: tried again (at
        most a second apart, so a Redis back is found at once) until the call's
        deadline, then a `TransientError` for the outbox. Not the outbox's own retries,
        whose waits grow to 30 s and which give up after five."""
        fields: Any = {"c": call.model_dump_json(), "r": self._replies}
        retries = Retries(REDIS_BACKOFF)
        while True:
            try:
                await self._redis.xadd(
                    calls_stream(self._prefix, platform), fields, maxlen=STREAM_CAP
                )
                return
            except RedisError as exc:
                self._stats.redis_errors += 1
                delay = retries.next()
                if time.time() + delay >= deadline:
                    raise TransientError(f"Redis: {exc}") from None
                log.warning("sending a platform call failed (%s); retrying", exc)
                await anyio.sleep(delay)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read the answers for this worker until cancelled."""
        # From the start, not "$": an answer added while this reads nothing yet (or
        # reconnects) would be missed. The stream is this instance's own and trimmed
        # as it is read, so its start is what is unread.
        last = "0-0"
        task_status.started()
        retries = Retries(REDIS_BACKOFF)
        while True:
            try:
                found: Any = await self._redis.xread(
                    {self._replies: last}, count=200, block=BLOCK_MS
                )
            except RedisError as exc:
                self._stats.redis_errors += 1
                delay = retries.next()
                log.warning("reading call answers failed (%s); retrying in %.1f s", exc, delay)
                await anyio.sleep(delay)
                continue
            retries.reset()
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
    """`Adapter` with every capability of `bridge.platform`: its calls a frontend
    makes, the rest (limits, formatting, which chats stream or draft) the local
    adapter answers. A frontend whose platform lacks a capability refuses its calls
    (`bridge.platform.Member.lacking`); the outbox never makes them, since the local
    adapter, of the same platform, says no chat streams or drafts."""

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

    # --- answered here ---------------------------------------------------------------------

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

    # --- made by a frontend ----------------------------------------------------------------

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        markup: Markup = "plain",
        buttons: Keyboard = (),
        force_reply: bool = False,
        silent: bool = False,
        ping: Mention | None = None,
    ) -> MessageRef:
        return await self._ref(
            PlatformCall(
                "send",
                chat=chat,
                text=text,
                markup=markup,
                buttons=buttons,
                force_reply=force_reply,
                silent=silent,
                ping=ping,
            )
        )

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        await self._call(PlatformCall("edit", ref=ref, text=text, markup=markup, buttons=buttons))

    async def delete(self, ref: MessageRef) -> None:
        await self._call(PlatformCall("delete", ref=ref))

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        call = PlatformCall("upload", chat=chat, filename=filename, data=data, text=caption)
        return await self._ref(call)

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        await self._call(PlatformCall("answer_press", press_id=press_id, text=text, alert=alert))

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        await self._call(PlatformCall("react", chat=chat, message_id=message_id, state=state))

    async def start_stream(
        self, chat: ChatRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> MessageRef:
        return await self._ref(
            PlatformCall("start_stream", chat=chat, text=markdown, tasks=tuple(tasks))
        )

    async def append_stream(
        self, ref: MessageRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> None:
        await self._call(PlatformCall("append_stream", ref=ref, text=markdown, tasks=tuple(tasks)))

    async def stop_stream(self, ref: MessageRef, markdown: str) -> None:
        await self._call(PlatformCall("stop_stream", ref=ref, text=markdown))

    async def set_status(self, chat: ChatRef, text: str) -> None:
        await self._call(PlatformCall("set_status", chat=chat, text=text))

    async def draft(
        self, chat: ChatRef, draft_id: int, text: str, *, markup: Markup = "plain"
    ) -> None:
        await self._call(
            PlatformCall("draft", chat=chat, draft_id=draft_id, text=text, markup=markup)
        )

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        return (await self._call(PlatformCall("direct_chat", user_id=user_id))).chat

    # --- the way there -----------------------------------------------------------------------

    async def _call(self, call: PlatformCall) -> Answer:
        key = CALLING.get()
        fence = self._fence(key) if key else 0
        if key and fence == 0:
            raise Fenced(f"{key} is not this worker's")
        showing = SHOWING.get()
        wired = Call(
            id=secrets.token_hex(8),
            key=key,
            fence=fence,
            deadline=time.time() + CALL_TIMEOUT,
            status="" if showing is None else "live" if showing else "over",
            **carried(call),
        )
        answer = await self._link.call(self._platform, wired)
        raise_for(answer)
        return answer

    async def _ref(self, call: PlatformCall) -> MessageRef:
        answer = await self._call(call)
        if answer.ref is None:
            raise PlatformError(f"{call.method}: the frontend's answer has no message")
        return answer.ref


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(RedisError):
        await awaitable

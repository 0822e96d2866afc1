"""A worker's platform calls, made by a frontend: `CallServer` (the worker's side is
`remote.py`).

The worker's outbox is the ordinary one (ordering, coalescing, slots, streams,
retries); only its adapter is remote. Each call goes on the platform's call stream
(`calls:<platform>`, read by every frontend through one consumer group, so each
call is made by one frontend) and its answer comes back on the worker's own reply
stream. The outbox makes one call at a time per chat, so a chat's order holds
whichever frontends make its calls.

The frontend makes each call through `bridge.platform.perform`, as the outbox makes
its own: the platform interface's table (`bridge.platform.MEMBERS`) says what a call
is, which capability it needs (an adapter without it refuses the call) and whether
it counts against its chat's budget.

A call is acknowledged as soon as a frontend reads it: it is made at most once. A
call whose answer does not come within `CALL_TIMEOUT` (and a grace) is a
`TransientError` to the outbox (which retries), and a frontend never makes a call past
its deadline, nor lets one it is making run past it, so a retried call is not made
twice by a slow frontend and a late edit never lands over a newer one (a status's
final line edited back to "working…"). Before a call for a
conversation the frontend checks the worker's fencing token is still the
conversation's: a worker that lost its lease gets `Fenced` and touches nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

import anyio
from redis.exceptions import RedisError

from bridge.backoff import Backoff, Retries
from bridge.model import MessageRef
from bridge.platform import NotModified, PlatformError, perform
from bridge.scale.budget import Budgets
from bridge.scale.ended import EndedStatuses
from bridge.scale.groups import REDIS_BACKOFF, ensure_group
from bridge.scale.wire import Answer, Call, Fenced, answered, failed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import redis.asyncio as aioredis
    from anyio.abc import TaskStatus

    from bridge.platform import Adapter
    from bridge.scale.forms import SharedForms
    from bridge.scale.stats import ScaleStats

log = logging.getLogger(__name__)

CALL_TIMEOUT = 30.0  # s from a call's send to its deadline
# A worker waits this much past the deadline before it takes the call for lost: a
# frontend cuts a call off at its deadline, so a call the worker retries, or an op it
# sends next for the same message, can never be overtaken by the first one.
ANSWER_GRACE = 5.0
GROUP = "frontends"
STREAM_CAP = 100_000  # entries kept in a call or reply stream (approximate trimming)
BLOCK_MS = 2000
CONCURRENT_CALLS = 64  # per frontend and platform
SERVED_KEPT = 10_000  # call ids remembered, to make a call read twice once
REPLY_TRIES = 8  # at least, ≈ 7 s of back-off; and for as long as the worker waits
REPLY_BACKOFF = Backoff(first=0.1, cap=1.0)  # the waits between those tries


def calls_stream(prefix: str, platform: str) -> str:
    return f"{prefix}calls:{platform}"


class CallServer:
    """A frontend's side: make the calls workers send for one platform."""

    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        platform: str,
        adapter: Adapter,
        instance: str,
        fence_of: Callable[[str], Awaitable[int]],
        stats: ScaleStats,
        forms: SharedForms | None = None,
    ) -> None:
        self._redis = client
        self._stream = calls_stream(prefix, platform)
        self._adapter = adapter
        self._instance = instance
        self._fence_of = fence_of  # key → its current fencing token
        self._budgets = Budgets(client, prefix, platform)
        self._ended = EndedStatuses(client, prefix, platform)
        self._stats = stats
        self._forms = forms
        self._limiter = anyio.Semaphore(CONCURRENT_CALLS)  # released by the task it starts
        # The calls served lately, by id: one read twice (again as pending after a Redis
        # failure, or sent twice by a worker whose send's answer was lost) is made once.
        self._served: OrderedDict[str, None] = OrderedDict()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        retries, ready = Retries(REDIS_BACKOFF), False
        async with anyio.create_task_group() as tg:
            while True:
                found: Any = None
                try:
                    start = ">"
                    if not ready:  # again after any failure: Redis may have lost it
                        # From the start: calls made before any frontend ran are past
                        # their deadlines by now, or still wanted.
                        await ensure_group(self._redis, self._stream, GROUP)
                        ready = True
                        # Read once already, but the answer to the read was lost with
                        # the connection: they are this frontend's pending ones.
                        start = "0"
                    found = await self._redis.xreadgroup(
                        GROUP, self._instance, {self._stream: start}, count=50, block=BLOCK_MS
                    )
                    ids = [entry_id for _s, entries in found or () for entry_id, _f in entries]
                    if ids:  # at most once: a lost call is retried by its worker
                        async with self._redis.pipeline(transaction=False) as pipe:
                            pipe.xack(self._stream, GROUP, *ids)
                            pipe.xdel(self._stream, *ids)  # a made call is kept nowhere
                            await pipe.execute()
                except RedisError as exc:
                    self._stats.redis_errors += 1
                    ready = False
                    log.warning("reading platform calls failed (%s); retrying", exc)
                    # Read but not acknowledged, or acknowledged with the answer lost:
                    # made all the same (left for the pending read, an acknowledgement
                    # that went through would lose them); read again, each is known by
                    # its id and not made twice.
                    if not found:
                        await anyio.sleep(retries.next())
                        continue
                else:
                    retries.reset()
                for _stream, entries in found or ():
                    for _id, fields in entries:
                        await self._limiter.acquire()
                        tg.start_soon(self._serve, fields)

    async def _serve(self, fields: dict[str, str]) -> None:
        try:
            try:
                call = Call.model_validate_json(fields.get("c", ""))
            except ValueError:
                log.warning("an unreadable platform call was dropped")
                return
            log.debug("call %s (%s) for %s: read", call.id, call.method, call.key)
            if call.id in self._served:
                log.debug("call %s: served already", call.id)
                return
            self._served[call.id] = None
            while len(self._served) > SERVED_KEPT:
                self._served.popitem(last=False)
            answer = await self._answer(call)
            log.debug(
                "call %s: %s", call.id, "dropped" if answer is None else answer.error or "made"
            )
            if answer is not None:
                await self._reply(fields.get("r", ""), answer, call.deadline)
        except RedisError as exc:
            self._stats.redis_errors += 1
            log.warning("answering a platform call failed: %s", exc)
        except Exception:  # one call's bug must not end the frontend
            log.exception("a platform call failed")
        finally:
            self._limiter.release()

    async def _reply(self, stream: str, answer: Answer, deadline: float) -> None:
        """The call was made: its answer must get through a Redis restart, or the
        worker would take the call for lost and make it again. Tried again while its
        worker still waits for it (up to its deadline and the grace), at least
        `REPLY_TRIES` times."""
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._redis.xadd(stream, {"a": answer.model_dump_json()}, maxlen=STREAM_CAP)
                return
            except RedisError as exc:
                waited_for = time.time() < deadline + ANSWER_GRACE if deadline else False
                if attempt >= REPLY_TRIES and not waited_for:
                    raise
                self._stats.redis_errors += 1
                log.warning("answering a platform call failed (%s); retrying", exc)
                await anyio.sleep(REPLY_BACKOFF.delay(attempt))

    async def _refused(self, call: Call) -> Answer | Literal[False] | None:
        """None: its worker gave up on it (past its deadline), and may have retried it
        already; `Fenced`: another worker owns its conversation now; `NotModified`: it
        would show working a status a call made over (a replay's, ended.py); False:
        make it."""
        if call.deadline and time.time() > call.deadline:
            return None
        if call.key and await self._fence_of(call.key) != call.fence:
            return failed(call.id, Fenced(f"{call.key}: another worker owns it now"))
        if call.status == "live" and call.ref is not None and await self._ended.ended(call.ref):
            log.info("%s: a status shown over was not edited back to live", call.key)
            return failed(call.id, NotModified("the run's end is shown; it stays"))
        return False

    async def _cleared(self, call: Call) -> Answer | Literal[False] | None:
        """`_refused`, and the call's budget taken, through a Redis restart: tried again
        until Redis answers or the call's deadline passes. A call dropped here for a
        Redis error would go unanswered, and its worker would wait out its deadline
        (30 s) before trying again: the stall of a Redis restart (issue 34)."""
        retries = Retries(REDIS_BACKOFF)
        while True:
            try:
                if (refused := await self._refused(call)) is not False:
                    return refused
                chat = call.chat or (call.ref.chat if call.ref is not None else None)
                buckets = self._budgets.buckets(self._adapter.limits, call.method, chat)
                self._stats.budget_waits += await self._budgets.take(buckets)
                # Again: the budget may have held it past its deadline, or past the lease.
                return await self._refused(call)
            except RedisError as exc:
                self._stats.redis_errors += 1
                log.warning("checking a platform call failed (%s); retrying", exc)
                await anyio.sleep(retries.next())

    async def _answer(self, call: Call) -> Answer | None:
        if (refused := await self._cleared(call)) is not False:
            return refused
        try:
            left = call.deadline - time.time() if call.deadline else math.inf
            with anyio.move_on_after(left) as cut:
                made = await perform(self._adapter, call.platform_call)
            if cut.cancelled_caught:
                log.warning("platform call %s cut off at its deadline", call.method)
                return None  # its worker takes it for lost, after the deadline
            answer = answered(call.id, made)
            shown = made if isinstance(made, MessageRef) else call.ref
            if call.status == "over" and shown is not None:
                with contextlib.suppress(RedisError):  # the worker's record has it too
                    await self._ended.mark(shown)
            if self._forms is not None and call.buttons:
                # Its press may reach another frontend: the form must be found there.
                with contextlib.suppress(RedisError):
                    await self._forms.remember(call.buttons)
            return answer
        except PlatformError as exc:
            return failed(call.id, exc)
        except Exception as exc:  # the adapter's bug: the worker's outbox drops the op
            log.exception("platform call %s failed", call.method)
            return failed(call.id, PlatformError(f"{type(exc).__name__}: {exc}"))

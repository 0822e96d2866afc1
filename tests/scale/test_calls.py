"""A worker's platform calls made by a frontend, on a real redis-server, in-process
(bridge/scale/calls.py): the worker's `RemoteAdapter` and `CallLink`, the frontend's
`CallServer` over an in-memory platform, in one task group."""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from bridge.model import ChatRef, MessageRef, PlatformLimits
from bridge.outbox.calls import CALLING, SHOWING
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    StreamEnded,
    TooLong,
)
from bridge.scale.budget import Budgets
from bridge.scale.calls import CallServer, calls_stream
from bridge.scale.forms import SharedForms
from bridge.scale.lease import Leases
from bridge.scale.remote import CallLink, RemoteAdapter, replies_stream
from bridge.scale.stats import ScaleStats
from bridge.scale.wire import Answer, Call, Fenced
from tests.support.recording_adapter import StreamingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    import redis.asyncio as aioredis

    from tests.support.recording_adapter import CallKind

pytestmark = pytest.mark.anyio

PLATFORM = "telegram"
KEY = "tg:1"
CHAT = ChatRef("1")
WORKER = "w1/i1"
FAST = PlatformLimits(chat_rate=1000.0, global_rate=1000.0)
BINARY = bytes(range(256))
WAIT = 10.0  # s any one test may take


@dataclass
class Rig:
    client: aioredis.Redis
    prefix: str
    platform: StreamingAdapter  # what the frontend's calls reach
    remote: RemoteAdapter  # the worker's adapter
    link: CallLink  # under it: the worker's end of the call streams
    leases: Leases
    tokens: dict[str, int]  # the worker's fencing tokens, by conversation
    instance: str


@contextlib.asynccontextmanager
async def rig(
    client: aioredis.Redis, limits: PlatformLimits = FAST, *, serve: bool = True, outage: int = 0
) -> AsyncIterator[Rig]:
    """A frontend (unless not `serve`) and a worker holding KEY's lease, running. The
    frontend's first `outage` fencing checks meet Redis restarting."""
    prefix, instance = f"t{uuid.uuid4().hex}:", f"i-{uuid.uuid4().hex[:6]}"
    platform = StreamingAdapter(limits)
    leases = Leases(client, prefix)
    held = await leases.claim(KEY, WORKER, 60.0)
    assert held is not None
    tokens = {KEY: held.token}
    link = CallLink(client, prefix, instance, ScaleStats())
    remote = RemoteAdapter(StreamingAdapter(limits), link, PLATFORM, lambda k: tokens.get(k, 0))
    failing = [outage]

    async def fence_of(key: str) -> int:
        if failing[0] > 0:
            failing[0] -= 1
            raise RedisConnectionError("Connection closed by server.")
        return await leases.current_token(key)

    async with anyio.create_task_group() as tg:
        if serve:
            forms = SharedForms(client, prefix)
            server = CallServer(
                client, prefix, PLATFORM, platform, "f1", fence_of, ScaleStats(), forms
            )
            await tg.start(server.run)
        await tg.start(link.run)
        await _blocked_in(client, "xread")  # the worker reads its answers
        with anyio.fail_after(WAIT):
            yield Rig(client, prefix, platform, remote, link, leases, tokens, instance)
        tg.cancel_scope.cancel()


@contextlib.contextmanager
def showing(live: bool | None) -> Iterator[None]:
    """What the outbox says of a call: it shows a run's status live, over, or neither."""
    token = SHOWING.set(live)
    try:
        yield
    finally:
        SHOWING.reset(token)


@contextlib.contextmanager
def calling(key: str) -> Iterator[None]:
    """What the outbox does around a conversation's calls (bridge/outbox/calls.py)."""
    token = CALLING.set(key)
    try:
        yield
    finally:
        CALLING.reset(token)


async def test_calls_reach_the_platform_and_return_its_refs(client: aioredis.Redis) -> None:
    async with rig(client) as r:
        with calling(KEY):
            sent = await r.remote.send(CHAT, "hi", silent=True)
            await r.remote.edit(sent, "hi again")
            uploaded = await r.remote.upload(CHAT, "out.bin", BINARY, caption="output")
            streamed = await r.remote.start_stream(CHAT, "Think")
            await r.remote.append_stream(streamed, "ing")
            await r.remote.stop_stream(streamed, ".")
            await r.remote.delete(sent)
        with calling(""):
            await r.remote.answer_press("press-1", "ok", alert=True)
            assert await r.remote.direct_chat("U1") is None  # the platform has no DMs

    assert [c.kind for c in r.platform.calls] == [
        "send",
        "edit",
        "upload",
        "stream_start",
        "stream_append",
        "stream_stop",
        "delete",
        "answer_press",
    ]
    assert sent == r.platform.calls_of("send")[0].ref == MessageRef(CHAT, "1")
    assert uploaded == r.platform.uploads[0].ref == MessageRef(CHAT, "2")
    assert r.platform.uploads[0].data == BINARY
    assert r.platform.uploads[0].caption == "output"
    assert streamed == MessageRef(CHAT, "3")
    assert r.platform.texts("1") == ["output", "Thinking."]
    assert r.platform.messages[sent].edits == ["hi again"]
    assert r.platform.messages[sent].silent
    assert r.platform.answers == [("press-1", "ok", True)]


async def _edit(remote: RemoteAdapter) -> None:
    await remote.edit(MessageRef(CHAT, "1"), "new text")


async def _send(remote: RemoteAdapter) -> None:
    await remote.send(CHAT, "text", markup="formatted")


async def _append(remote: RemoteAdapter) -> None:
    await remote.append_stream(MessageRef(CHAT, "1"), "more")


@pytest.mark.parametrize(
    ("kind", "invoke", "raised", "arrives_as"),
    [
        pytest.param("edit", _edit, NotModified("not modified"), NotModified, id="not-modified"),
        pytest.param("edit", _edit, RateLimited(3.5), RateLimited, id="rate-limited"),
        pytest.param("edit", _edit, MessageGone("gone"), MessageGone, id="message-gone"),
        pytest.param("send", _send, TooLong("too long"), TooLong, id="too-long"),
        pytest.param("send", _send, BadFormatting("entities"), BadFormatting, id="bad-formatting"),
        pytest.param(
            "stream_append", _append, StreamEnded("not streaming"), StreamEnded, id="stream-ended"
        ),
        pytest.param("edit", _edit, ValueError("boom"), PlatformError, id="adapter-bug"),
    ],
)
async def test_the_platforms_error_is_raised_on_the_workers_side(
    client: aioredis.Redis,
    kind: CallKind,
    invoke: Callable[[RemoteAdapter], Awaitable[None]],
    raised: Exception,
    arrives_as: type[PlatformError],
) -> None:
    async with rig(client) as r:
        r.platform.fail_next(kind, raised)
        with calling(KEY), pytest.raises(PlatformError) as info:
            await invoke(r.remote)

    assert type(info.value) is arrives_as
    assert [(c.kind, c.error) for c in r.platform.calls] == [(kind, raised)]
    if isinstance(raised, RateLimited):
        assert isinstance(info.value, RateLimited)
        assert info.value.retry_after == raised.retry_after
    if type(raised) is ValueError:
        assert str(info.value) == "ValueError: boom"


async def test_an_edit_to_the_same_text_is_not_modified_on_the_workers_side(
    client: aioredis.Redis,
) -> None:
    async with rig(client) as r:
        with calling(KEY):
            ref = await r.remote.send(CHAT, "same")
            with pytest.raises(NotModified):
                await r.remote.edit(ref, "same")


@pytest.mark.parametrize(
    ("key", "worker_token", "redis_token", "fenced"),
    [
        pytest.param(KEY, 1, None, False, id="current-token"),
        pytest.param(KEY, 1, 5, True, id="stale-token"),
        pytest.param(KEY, 7, 5, True, id="token-from-nowhere"),
        pytest.param(KEY, 0, None, True, id="not-this-workers"),
        pytest.param("", 1, 5, False, id="no-conversation-no-fencing"),
    ],
)
async def test_a_call_with_a_stale_fencing_token_is_fenced_and_not_made(
    client: aioredis.Redis, key: str, worker_token: int, redis_token: int | None, fenced: bool
) -> None:
    async with rig(client) as r:
        r.tokens[KEY] = worker_token
        if redis_token is not None:  # another worker took the conversation over
            await client.set(r.leases.fence_key(KEY), redis_token)
        with calling(key):
            if fenced:
                with pytest.raises(Fenced):
                    await r.remote.send(CHAT, "from a worker that lost it")
            else:
                await r.remote.send(CHAT, "hi")

    assert len(r.platform.calls) == (0 if fenced else 1)


async def test_a_call_past_its_deadline_is_not_made(client: aioredis.Redis) -> None:
    async with rig(client) as r:
        late = replies_stream(r.prefix, "late")
        await _put_call(r, Call(id="late", method="send", chat=CHAT, text="late", deadline=1.0))
        with calling(KEY):  # made after the late one: its answer says both were served
            await r.remote.send(CHAT, "on time")

        assert await client.xlen(late) == 0

    assert r.platform.texts("1") == ["on time"]


async def test_a_call_sent_before_any_frontend_runs_is_made_when_one_starts(
    client: aioredis.Redis,
) -> None:
    async with rig(client, serve=False) as r:
        with calling(KEY):
            async with anyio.create_task_group() as tg:
                tg.start_soon(r.remote.send, CHAT, "early")
                await anyio.sleep(0.2)
                assert r.platform.calls == []
                fences = r.leases.current_token
                server = CallServer(
                    client, r.prefix, PLATFORM, r.platform, "f1", fences, ScaleStats()
                )
                tg.start_soon(server.run)
                await r.platform.wait_for(lambda: bool(r.platform.calls))
                await anyio.sleep(0.1)
                tg.cancel_scope.cancel()

    assert r.platform.texts("1") == ["early"]


async def test_a_call_whose_budget_wait_outlasts_its_deadline_is_not_made(
    client: aioredis.Redis,
) -> None:
    slow = PlatformLimits(chat_rate=1000.0, global_rate=1.0)  # one call a second
    async with rig(client, slow) as r:
        budgets = Budgets(client, r.prefix, PLATFORM)
        assert await budgets.wait_ms(budgets.buckets(slow, "send", CHAT)) == 0  # spent
        # Its worker waits 0.3 s; the budget has a token again only in ~1 s.
        call = Call(id="c", method="send", chat=CHAT, text="late", deadline=time.time() + 0.3)
        await _put_call(r, call)
        await anyio.sleep(1.5)

    assert r.platform.calls == []


async def test_a_call_still_being_made_at_its_deadline_is_cut_off_unanswered(
    client: aioredis.Redis,
) -> None:
    # Its worker takes it for lost after the deadline and goes on (a retry, or the next
    # edit of the same message, e.g. a run's final line): the first must not land later.
    async with rig(client) as r:
        r.platform.latency = 1.0  # the platform takes a second to decide
        late = replies_stream(r.prefix, "late")
        call = Call(id="c", method="send", chat=CHAT, text="late", deadline=time.time() + 0.3)
        await _put_call(r, call)
        await anyio.sleep(1.5)
        assert await client.xlen(late) == 0

    assert r.platform.calls == []


async def test_an_answer_added_while_the_reader_reconnects_still_arrives(
    client: aioredis.Redis,
) -> None:
    async with rig(client, serve=False) as r:
        call = Call(id="c1", method="answer_press", press_id="p")
        got: list[Answer] = []
        answered = anyio.Event()

        async def wait_for_answer() -> None:
            got.append(await r.link.call(PLATFORM, call))
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_for_answer)
            await _entries_in(client, calls_stream(r.prefix, PLATFORM))
            reader = await _blocked_in(client, "xread")
            answer = Answer(id="c1").model_dump_json()
            async with client.pipeline(transaction=True) as pipe:
                # The reader's connection drops, and the answer comes, in one step.
                pipe.client_kill_filter(_id=reader)
                pipe.xadd(replies_stream(r.prefix, r.instance), {"a": answer})
                await pipe.execute()
            with anyio.move_on_after(3):
                await answered.wait()
            tg.cancel_scope.cancel()

    assert got == [Answer(id="c1")]


async def _put_call(r: Rig, call: Call) -> None:
    """A call as a worker puts it on the call stream, answered to `replies:late`."""
    fields: Any = {"c": call.model_dump_json(), "r": replies_stream(r.prefix, "late")}
    await r.client.xadd(calls_stream(r.prefix, PLATFORM), fields)


async def _entries_in(client: aioredis.Redis, stream: str) -> None:
    with anyio.fail_after(5):
        while True:
            if await client.xlen(stream):
                return
            await anyio.sleep(0.01)


async def _blocked_in(client: aioredis.Redis, command: str) -> str:
    """The id of a client now blocked in `command` (a blocking stream read)."""
    with anyio.fail_after(5):
        while True:
            for one in await client.client_list():
                if one.get("cmd") == command and "b" in one.get("flags", ""):
                    return str(one["id"])
            await anyio.sleep(0.01)


async def test_a_buttons_form_is_found_by_every_frontend(client: aioredis.Redis) -> None:
    from bridge.model import Button, Form

    why = Form("Why not?", multiline=True)
    buttons = ((Button("Allow", "tok-allow"), Button("Deny…", "tok-deny", form=why)),)
    async with rig(client) as r:
        with calling(KEY):
            await r.remote.send(CHAT, "Run this?", buttons=buttons)
        # Another frontend, which did not post the question, gets the press.
        elsewhere = SharedForms(client, r.prefix)
        assert await elsewhere.find("tok-deny") == why
        assert await elsewhere.find("tok-allow") is None
        assert await elsewhere.find("unknown") is None


async def test_a_call_whose_check_meets_a_redis_restart_is_made_once_redis_answers(
    client: aioredis.Redis,
) -> None:
    # Dropped, the call went unanswered and its worker waited out its deadline and
    # grace (35 s) before its outbox tried again: the stall of a Redis restart.
    async with rig(client, outage=3) as r:
        started = time.monotonic()
        with calling(KEY):
            await r.remote.send(CHAT, "through the restart")
        assert time.monotonic() - started < 3.0
    assert [c.text for c in r.platform.calls] == ["through the restart"]


async def test_a_status_a_call_made_over_is_never_edited_live_again(
    client: aioredis.Redis,
) -> None:
    # Issue 34: a worker killed while its run's end waited at a frontend; the end was
    # made, and the next owner's replay edited the status back to working.
    async with rig(client) as r:
        with calling(KEY):
            with showing(True):
                status = await r.remote.send(CHAT, "⏳ working…")
            with showing(False):
                await r.remote.edit(status, "✅ done")
            with showing(True), pytest.raises(NotModified):
                await r.remote.edit(status, "⏳ working…")
            with showing(False):  # an interruption's reason may still be added
                await r.remote.edit(status, "✅ done: and why")
            with showing(None):  # not a status: not refused
                await r.remote.edit(status, "text")
            with showing(True):  # another run's status
                await r.remote.send(CHAT, "⏳ working…")
    assert [c.text for c in r.platform.calls] == [
        "⏳ working…",
        "✅ done",
        "✅ done: and why",
        "text",
        "⏳ working…",
    ]

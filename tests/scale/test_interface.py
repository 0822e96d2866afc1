"""The scale-out carries the whole platform interface, on a real redis-server: every
call in `bridge.platform`'s table goes from a worker's `RemoteAdapter` through the
call streams to a frontend's platform and back (bridge/scale/remote.py, calls.py),
and every member a worker answers itself is its local adapter's. A member added to
the interface without its way through the scale-out fails here."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.model import ChatRef, MessageRef, PlatformLimits
from bridge.platform import CALLS, CAPABILITIES, MEMBER, MEMBERS, Forms, PlatformCall
from bridge.scale.calls import CallServer
from bridge.scale.remote import CallLink, RemoteAdapter
from bridge.scale.stats import ScaleStats
from bridge.scale.wire import Call, carried
from tests.support.every_capability import CHAT, DM, SAMPLES, EveryCapability
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import redis.asyncio as aioredis

    from bridge.platform import Adapter

pytestmark = pytest.mark.anyio

PLATFORM = "everything"
WAIT = 10.0  # s any one test may take


async def _no_fence(key: str) -> int:
    return 0


def _remote(client: aioredis.Redis, local: Adapter, prefix: str = "") -> RemoteAdapter:
    link = CallLink(client, prefix, f"i-{uuid.uuid4().hex[:6]}", ScaleStats())
    return RemoteAdapter(local, link, PLATFORM, lambda key: 0)  # no conversation: no fence


@contextlib.asynccontextmanager
async def serving(
    client: aioredis.Redis, local: Adapter
) -> AsyncIterator[tuple[RemoteAdapter, EveryCapability]]:
    """A frontend making calls on a platform with every capability, and a worker's
    remote adapter over `local`."""
    prefix, instance = f"t{uuid.uuid4().hex}:", f"i-{uuid.uuid4().hex[:6]}"
    platform = EveryCapability()
    link = CallLink(client, prefix, instance, ScaleStats())
    remote = RemoteAdapter(local, link, PLATFORM, lambda key: 0)
    server = CallServer(client, prefix, PLATFORM, platform, "f1", _no_fence, ScaleStats())
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        await tg.start(link.run)
        with anyio.fail_after(WAIT):
            yield remote, platform
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_every_call_reaches_the_frontends_platform_and_its_answer_comes_back(
    client: aioredis.Redis, name: str
) -> None:
    _call, expected = SAMPLES[name]
    async with serving(client, EveryCapability()) as (remote, platform):
        # The remote method takes the arguments under the interface's own names.
        made = await getattr(remote, name)(**expected)

    assert platform.calls == [(name, expected)]
    if name in ("send", "upload", "start_stream"):
        assert made == MessageRef(CHAT, "1")
    else:
        assert made == (DM if name == "direct_chat" else None)


LIMITS = PlatformLimits(max_text=123)


@pytest.mark.parametrize(
    ("make", "streams", "drafts"),
    [
        pytest.param(EveryCapability, True, True, id="a-platform-that-streams-and-drafts"),
        pytest.param(RecordingAdapter, False, False, id="a-platform-that-does-neither"),
    ],
)
async def test_what_a_worker_answers_itself_is_its_local_adapters(
    client: aioredis.Redis,
    make: Callable[[PlatformLimits], Adapter],
    streams: bool,
    drafts: bool,
) -> None:
    local = make(LIMITS)
    async with serving(client, local) as (remote, platform):
        assert remote.limits is LIMITS
        assert remote.format("a" * 200, 5) == local.format("a" * 200, 5)
        assert remote.streams_in(ChatRef("c")) is streams
        assert remote.drafts_in(ChatRef("c")) is drafts

    assert platform.calls == []  # nothing of it went to a frontend
    local_members = {m.name for m in MEMBERS if m.place == "local"}
    assert local_members == {"limits", "format", "streams_in", "drafts_in"}


async def test_the_remote_adapter_has_every_capability_a_worker_needs(
    client: aioredis.Redis,
) -> None:
    remote = _remote(client, RecordingAdapter())  # of a platform with none
    wanted = {m.capability for m in MEMBERS if m.place != "frontend"}
    frontend_only = {m.capability for m in MEMBERS} - wanted

    assert {c for c in CAPABILITIES if isinstance(remote, c)} == wanted
    assert frontend_only == {Forms}  # set where a frontend is assembled (bridge/app/roles.py)
    assert MEMBER["forms_elsewhere"].place == "frontend"


def test_the_wire_carries_every_argument_of_a_call() -> None:
    wire = Call.model_fields
    for f in fields(PlatformCall):
        assert f.name in wire, f"Call lacks {f.name}"
        assert wire[f.name].is_required() == (f.default is MISSING), f.name
        assert f.default is MISSING or wire[f.name].default == f.default, f.name

    for name, (call, _expected) in SAMPLES.items():
        sent = Call(id=name, key="tg:1", fence=3, **carried(call))
        assert Call.model_validate_json(sent.model_dump_json()).platform_call == call


def test_the_wire_refuses_a_call_that_is_no_call() -> None:
    with pytest.raises(ValueError, match="no call"):
        Call.model_validate_json('{"id": "c1", "method": "limits"}')

"""A frontend's part on a real redis-server (bridge/scale/frontend.py): admitted
inbounds forwarded onto their conversation's stream (deduplicated, claimed when
nobody owns the conversation), and the Telegram poller gated by its lease."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
import pytest

from bridge.model import Attachment, AttachmentRefused, ChatRef, Inbound, Sender
from bridge.options import AgentOptions, BridgeOptions
from bridge.scale.frontend import Forwarder, while_polling
from bridge.scale.lease import Leases
from bridge.scale.names import POLL_LEASE, claims_stream, inbound_stream
from bridge.scale.stats import ScaleStats
from bridge.scale.wire import unwrap

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    import redis.asyncio as aioredis
    from anyio.abc import TaskStatus

pytestmark = pytest.mark.anyio

KEY = "tg:42"
CHAT = ChatRef("42")
ANN = Sender("7", "Ann")
FILE_CAP = 10  # bytes: the options' file_max_bytes
TTL = 1.5  # s: the polling lease's


@pytest.fixture
def forwarder(client: aioredis.Redis, prefix: str, tmp_path: Path) -> Forwarder:
    options = BridgeOptions(
        data_dir=tmp_path, agent=AgentOptions(argv=("false",), env={}), file_max_bytes=FILE_CAP
    )
    return Forwarder(client, prefix, options, ScaleStats())


def inbound(event_id: str, text: str = "hi", *attachments: Attachment) -> Inbound:
    return Inbound(KEY, CHAT, ANN, event_id, text=text, attachments=attachments)


async def forwarded(client: aioredis.Redis, prefix: str) -> list[tuple[Inbound, float]]:
    entries: Any = await client.xrange(inbound_stream(prefix, KEY))
    return [unwrap(fields["e"]) for _id, fields in entries]


# --- forwarding ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_ids", "kept"),
    [
        pytest.param(["e1"], ["e1"], id="one"),
        pytest.param(["e1", "e1"], ["e1"], id="redelivered-once-kept"),
        pytest.param(["e1", "e2", "e1", "e2"], ["e1", "e2"], id="two-each-redelivered"),
        pytest.param(["", ""], ["", ""], id="no-delivery-id-never-deduplicated"),
    ],
)
async def test_a_delivery_id_is_forwarded_once(
    forwarder: Forwarder, client: aioredis.Redis, prefix: str, event_ids: list[str], kept: list[str]
) -> None:
    for n, event_id in enumerate(event_ids):
        assert await forwarder.deliver(inbound(event_id, f"m{n}"), 1000.0 + n)

    got = await forwarded(client, prefix)

    assert [i.event_id for i, _ in got] == kept
    assert got[0] == (inbound(event_ids[0], "m0"), 1000.0)


@pytest.mark.parametrize(
    ("owned", "deliveries", "claims"),
    [
        pytest.param(False, ["e1"], 1, id="no-owner-claimed"),
        pytest.param(True, ["e1"], 0, id="owner-not-claimed"),
        pytest.param(False, ["e1", "e1"], 1, id="redelivery-not-claimed-again"),
        pytest.param(False, ["e1", "e2"], 2, id="each-inbound-while-unowned"),
    ],
)
async def test_an_inbound_for_a_conversation_without_owner_is_named_on_the_claims_stream(
    forwarder: Forwarder,
    client: aioredis.Redis,
    prefix: str,
    owned: bool,
    deliveries: list[str],
    claims: int,
) -> None:
    if owned:
        assert await Leases(client, prefix).claim(KEY, "w1/a", 30.0) is not None

    for event_id in deliveries:
        await forwarder.deliver(inbound(event_id), 1000.0)

    entries: Any = await client.xrange(claims_stream(prefix))
    assert [fields for _id, fields in entries] == [{"k": KEY}] * claims
    assert await client.xlen(inbound_stream(prefix, KEY)) == len(set(deliveries))


@dataclass
class Platform:
    """A file on the platform: `fetch` gives `data` or raises `error`; counts fetches."""

    data: bytes = b""
    error: Exception | None = None
    fetches: int = 0

    async def fetch(self, cap: int) -> bytes:
        self.fetches += 1
        if self.error is not None:
            raise self.error
        return self.data


@pytest.mark.parametrize(
    ("kind", "size", "platform", "data", "refusal", "fetches"),
    [
        pytest.param(
            "file", 4, Platform(b"\x00\xff\x80\x01"), b"\x00\xff\x80\x01", "", 1, id="data"
        ),
        pytest.param(
            "file",
            None,
            Platform(error=AttachmentRefused("no access")),
            None,
            "^no access$",
            1,
            id="refused-with-reason",
        ),
        pytest.param(
            "voice",
            3,
            Platform(error=RuntimeError("HTTP 500")),
            None,
            "could not be fetched from the platform",
            1,
            id="generic-error-is-a-refusal",
        ),
        pytest.param(
            "file",
            FILE_CAP + 1,
            Platform(b"x"),
            None,
            "the limit is",
            0,
            id="announced-over-cap-not-fetched",
        ),
        pytest.param(
            "image",
            FILE_CAP + 1,
            Platform(b"y" * 11),
            b"y" * 11,
            "",
            1,
            id="images-have-their-own-cap",
        ),
    ],
)
async def test_an_attachment_is_carried_fetched_or_as_its_refusal(
    forwarder: Forwarder,
    client: aioredis.Redis,
    prefix: str,
    kind: Literal["image", "file", "voice"],
    size: int | None,
    platform: Platform,
    data: bytes | None,
    refusal: str,
    fetches: int,
) -> None:
    attachment = Attachment("x/y", size, platform.fetch, kind=kind, name="f.bin")

    await forwarder.deliver(inbound("e1", "see", attachment), 1000.0)

    ((again, _),) = await forwarded(client, prefix)
    (carried,) = again.attachments
    assert (carried.kind, carried.size, carried.name) == (kind, size, "f.bin")
    assert platform.fetches == fetches
    if data is None:
        with pytest.raises(AttachmentRefused, match=refusal):
            await carried.fetch(10**9)
    else:
        assert await carried.fetch(10**9) == data


# --- the polling lease ------------------------------------------------------------------


@dataclass
class Pollers:
    """Who polls now, the most at once ever, and whether each ever polled."""

    now: list[str]
    most: int = 0

    def __post_init__(self) -> None:
        self.began: dict[str, anyio.Event] = {}
        self.anyone = anyio.Event()

    def began_event(self, name: str) -> anyio.Event:
        return self.began.setdefault(name, anyio.Event())

    async def stopped(self) -> None:
        while True:
            if not self.now:
                return
            await anyio.sleep(0.01)

    def poll(self, name: str) -> Callable[[], Awaitable[None]]:
        async def poll() -> None:
            self.now.append(name)
            self.most = max(self.most, len(self.now))
            self.began_event(name).set()
            self.anyone.set()
            try:
                await anyio.sleep_forever()
            finally:
                self.now.remove(name)

        return poll


async def test_one_frontend_polls_and_another_takes_over_when_it_stops(
    client: aioredis.Redis, prefix: str
) -> None:
    pollers = Pollers([])
    scopes: dict[str, anyio.CancelScope] = {}
    stats = {"f1": ScaleStats(), "f2": ScaleStats()}

    ended = {"f1": anyio.Event(), "f2": anyio.Event()}

    async def frontend(name: str, *, task_status: TaskStatus[None]) -> None:
        try:
            with anyio.CancelScope() as scope:
                scopes[name] = scope
                task_status.started()
                await while_polling(client, prefix, name, TTL, stats[name], pollers.poll(name))
        finally:
            ended[name].set()

    async with anyio.create_task_group() as tg:
        await tg.start(frontend, "f1")
        await tg.start(frontend, "f2")
        with anyio.fail_after(5):
            await pollers.anyone.wait()
        (first,) = pollers.now
        (second,) = {"f1", "f2"} - {first}
        await anyio.sleep(TTL * 4)  # renewed several times; the other kept asking

        assert pollers.now == [first]
        assert (stats[first].polling, stats[second].polling) == (True, False)
        assert not pollers.began_event(second).is_set()

        stopped = anyio.current_time()
        scopes[first].cancel()  # the frontend shuts down: it lets the lease go
        await ended[first].wait()
        lease = Leases(client, prefix).lease_key(POLL_LEASE)
        assert await client.get(lease) in (None, second)  # released, not left to lapse
        with anyio.fail_after(5):
            await pollers.began_event(second).wait()
        took = anyio.current_time() - stopped

        assert pollers.now == [second]
        assert (stats[first].polling, stats[second].polling) == (False, True)
        tg.cancel_scope.cancel()

    assert took < TTL  # released, not lapsed: the other's next ask (every TTL/3) gets it
    assert pollers.most == 1


async def test_a_frontend_that_lost_the_lease_stops_polling(
    client: aioredis.Redis, prefix: str
) -> None:
    pollers = Pollers([])
    stats = ScaleStats()
    async with anyio.create_task_group() as tg:
        tg.start_soon(while_polling, client, prefix, "f1", TTL, stats, pollers.poll("f1"))
        with anyio.fail_after(5):
            await pollers.began_event("f1").wait()

        # Another frontend's name with the same start takes it over (and never renews).
        taken = await Leases(client, prefix).claim(
            POLL_LEASE, "f1-restarted", TTL, mine_prefix="f1", indexed=False
        )
        assert taken is not None
        lost = anyio.current_time()
        with anyio.fail_after(5):
            await pollers.stopped()

        assert anyio.current_time() - lost < TTL  # at its next renewal
        assert not stats.polling
        assert await client.get(Leases(client, prefix).lease_key(POLL_LEASE)) == "f1-restarted"

        pollers.began.clear()  # the taker never renews: once its lease lapses, f1 polls again
        with anyio.fail_after(5):
            await pollers.began_event("f1").wait()
        tg.cancel_scope.cancel()

    assert pollers.most == 1


# --- presses on an approver's copy ------------------------------------------------------


@pytest.mark.parametrize(
    ("pressed_in", "copies", "lands_in"),
    [
        ("99", ["99"], KEY),  # the approver's direct message holds a copy: to the asker
        ("98", ["99"], "tg:98"),  # a token carried to a chat with no copy stays there
        ("42", [], KEY),  # the question's own chat
    ],
    ids=["copy", "no-copy-there", "own-chat"],
)
async def test_a_press_on_a_copy_goes_to_the_conversation_that_asked(
    client: aioredis.Redis,
    prefix: str,
    tmp_path: Path,
    pressed_in: str,
    copies: list[str],
    lands_in: str,
) -> None:
    from bridge.model import ButtonPress
    from bridge.options import ApprovalOptions
    from bridge.store import DialogRecord, SqliteStore

    store = await SqliteStore.open(tmp_path / "store.db")
    try:
        record = DialogRecord(
            token="tok",
            key=KEY,
            request_id="r1",
            method="select",
            message_chat="42",
            copies=copies,
            created_at=1.0,
        )
        await store.put_dialogs([record])
        options = BridgeOptions(
            data_dir=tmp_path,
            agent=AgentOptions(argv=("false",), env={}),
            approvals=ApprovalOptions(notify_approvers="dm"),
        )
        forwarder = Forwarder(client, prefix, options, ScaleStats(), store)
        press = Inbound(
            f"tg:{pressed_in}", ChatRef(pressed_in), ANN, "e1", press=ButtonPress("tok", "p1")
        )
        await forwarder.deliver(press, 0.0)
    finally:
        await store.aclose()
    entries: Any = await client.xrange(inbound_stream(prefix, lands_in))
    assert len(entries) == 1
    landed, _ = unwrap(entries[0][1]["e"])
    assert landed.key == lands_in
    assert landed.press is not None
    assert landed.press.token == "tok"

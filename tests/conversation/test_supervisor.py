"""The supervisor (bridge/conversation/supervisor.py): one conversation per key, made only
for a message that needs one; a press on an approver's copy of a question carried
to the conversation that asked; the caps on live agents.

Real parts (the sqlite store in a temporary dir, a recording platform, the outbox)
and no admission in front: inbounds are handed to `Supervisor.deliver` as the
bridge hands them. Agents are the scripted stand-in (tests/conversation/standin_pi.py).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.conversation.agent_slots import AgentSlots
from bridge.conversation.dialogs import NO_LONGER_ACTIVE
from bridge.conversation.shared import Services
from bridge.conversation.supervisor import Supervisor
from bridge.model import Attachment, ButtonPress, ChatRef, Inbound
from bridge.options import ApprovalOptions
from bridge.outbox import Outbox
from bridge.service import new_token
from bridge.store import open_store
from bridge.store.records import DialogRecord
from tests.conversation.room import WAIT, room_options
from tests.support.bridge_harness import CHAT, KEY, LIMITS, OWNER
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from bridge.options import BridgeOptions
    from bridge.store import Store

pytestmark = pytest.mark.anyio


@dataclass
class Supervised:
    supervisor: Supervisor
    adapter: RecordingAdapter
    store: Store
    _ids: int = 0

    async def deliver(self, inbound: Inbound) -> None:
        assert await self.supervisor.deliver(inbound)

    def said(self, text: str) -> Inbound:
        return self.inbound({"text": text})

    def inbound(self, fields: dict[str, object]) -> Inbound:
        self._ids += 1
        return Inbound(KEY, CHAT, OWNER, f"e{self._ids}", **fields)  # type: ignore[arg-type]

    def pressed(self, token: str, key: str = KEY, chat: ChatRef = CHAT) -> Inbound:
        self._ids += 1
        press = ButtonPress(token, f"p{self._ids}")
        return Inbound(key, chat, OWNER, f"e{self._ids}", press=press)

    async def until(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(WAIT):
            while not predicate():  # noqa: ASYNC110 (polls the platform)
                await anyio.sleep(0.01)


@contextlib.asynccontextmanager
async def supervised(opts: BridgeOptions, bot_name: str = "") -> AsyncIterator[Supervised]:
    adapter = RecordingAdapter(limits=LIMITS)
    store = await open_store("sqlite", opts.data_dir)
    outbox = Outbox(adapter)
    services = Services(
        adapter=adapter,
        outbox=outbox,
        store=store,
        options=opts,
        gate=AgentSlots(opts.max_agents),
        tokens=new_token,
        clock=time.monotonic,
        wall=time.time,
        bot_name=bot_name,
    )
    supervisor = Supervisor(services)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(outbox.run)
            await tg.start(supervisor.run)
            yield Supervised(supervisor, adapter, store)
            with anyio.CancelScope(shield=True):
                await supervisor.drain(grace=0)
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


async def nothing_to_fetch(cap: int) -> bytes:
    return b"notes"


NEEDS = [
    ("a press is answered without one", {"press": ButtonPress("tok", "p0")}, False),
    ("an empty message needs none", {"text": "  "}, False),
    ("a follow-up of nothing needs none", {"text": ">>"}, False),
    ("a bare /steer needs none", {"text": "/steer"}, False),
    ("a command needs one", {"text": "/verbose off"}, True),
    ("a stop needs one, to say nothing runs", {"text": "/stop"}, True),
    (
        "a file alone needs one",
        {"attachments": (Attachment("text/plain", 5, nothing_to_fetch, "file", "a.txt"),)},
        True,
    ),
    # Read with the bot's name: a command to another bot is text for the agent.
    ("a command to another bot is a message", {"text": "/later@otherbot"}, True),
]


@pytest.mark.parametrize(("fields", "makes"), [n[1:] for n in NEEDS], ids=[n[0] for n in NEEDS])
async def test_a_conversation_is_made_only_for_a_message_that_needs_one(
    tmp_path: Path, fields: dict[str, object], makes: bool
) -> None:
    async with supervised(room_options(tmp_path), bot_name="pibot") as bridge:
        await bridge.deliver(bridge.inbound(fields))
        assert (KEY in bridge.supervisor.conversations) is makes
        assert (await bridge.store.get_conversation(KEY) is not None) is makes
        if "press" in fields:
            await bridge.until(lambda: [a[1] for a in bridge.adapter.answers] == [NO_LONGER_ACTIVE])


DM = ChatRef("dm-9")
COPIES = [
    ("a press on the copy is the asking conversation's", DM, True),
    ("the same token pressed elsewhere is dead there", ChatRef("elsewhere"), False),
]


@pytest.mark.parametrize(("chat", "carried"), [c[1:] for c in COPIES], ids=[c[0] for c in COPIES])
async def test_a_press_on_an_approvers_copy_is_carried_to_the_conversation_that_asked(
    tmp_path: Path, chat: ChatRef, carried: bool
) -> None:
    opts = room_options(
        tmp_path, approvals=ApprovalOptions(mode="dangerous", notify_approvers="dm")
    )
    async with supervised(opts) as bridge:
        await bridge.deliver(bridge.said("/verbose off"))  # the asking conversation, in memory
        await bridge.until(lambda: any("shown: off" in t for t in bridge.adapter.texts(CHAT)))
        # Its question from before a restart, its copy posted in the approver's DM.
        question = DialogRecord(
            token="tok",
            key=KEY,
            request_id="req-1",
            method="select",
            copies=[DM.chat_id],
            created_at=0.0,
        )
        await bridge.store.put_dialogs([question])
        await bridge.deliver(bridge.pressed("tok", key=f"tg:{chat.chat_id}", chat=chat))
        await bridge.until(lambda: [a[1] for a in bridge.adapter.answers] == [NO_LONGER_ACTIVE])
        # Carried, it is the asking conversation's own dead question: retired there.
        assert (await bridge.store.get_dialog("tok") is None) is carried
        assert list(bridge.supervisor.conversations) == [KEY]


# --- the caps on live agents ----------------------------------------------------------------


@dataclass
class Seat:
    """A conversation as the caps see it (`shared.Holder`): what it would show is kept."""

    key: str
    owner: str = OWNER.id
    idle: bool = False
    last_active: float = 0.0
    max_per_user: int = 2
    notices: list[str] = field(default_factory=list)

    async def reap(self) -> None:
        raise AssertionError("a busy agent is never evicted")

    def notify(self, text: str) -> None:
        self.notices.append(text)


CAPS = [
    (
        "all agents are busy",
        AgentSlots(1),
        Seat("a", owner="someone else"),
        "All 1 agents are busy",
    ),
    ("the owner has as many as allowed", AgentSlots(5), Seat("a"), "You have 1 agents working"),
]


@pytest.mark.parametrize(
    ("slots", "holding", "told"), [c[1:] for c in CAPS], ids=[c[0] for c in CAPS]
)
async def test_a_newcomer_waits_for_a_busy_agent_to_finish_and_is_told_once(
    slots: AgentSlots, holding: Seat, told: str
) -> None:
    slots.admit(holding)
    waiting = Seat("b", max_per_user=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(slots.acquire, waiting)
        await anyio.wait_all_tasks_blocked()
        slots.changed()  # something changed, but nothing was freed: still waiting
        await anyio.wait_all_tasks_blocked()
        assert list(slots.live) == ["a"]
        assert len(waiting.notices) == 1
        assert told in waiting.notices[0]
        slots.release(holding)
    assert list(slots.live) == ["b"]

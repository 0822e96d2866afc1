"""A bridge killed mid-run leaves a status message with [⏹ Stop]; the next one retires it.

First the parts on their own: which ops make a run live or over (pure), the outbox's
adopted slots and observers (fake time), and `LiveRuns` keeping the store's record
in step. Then end to end with the real agent: a bridge whose task group is cancelled
without its drain, as a SIGKILL leaves it (no exit code runs, the agents die with
their pipes), and a fresh bridge on the same data dir and the same chat.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.conversation.live_runs import LiveRuns
from bridge.model import Button, ChatRef, Delete, Edit, PlatformLimits, React, Send
from bridge.outbox import Outbox
from bridge.platform import MessageGone
from bridge.render.status import CRASHED, retire_after_crash, run_is_live
from bridge.service import Bridge
from bridge.store import LiveRunRecord, open_store
from tests.support.bridge_harness import LIMITS, BridgeHarness, options
from tests.support.cli import agent_processes, kill_agents
from tests.support.fake_llm import Reply
from tests.support.journeys import script_long_run
from tests.support.recording_adapter import FakeClock, RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.model import MessageRef, Op
    from bridge.options import BridgeOptions
    from bridge.store import Store
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

KEY, CHAT = "tg:100", ChatRef("100", "7", is_group=True)
STOP = ((Button("⏹ Stop", "tok"),),)
REAL_SECONDS = 10


# --- which ops make a run live ----------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "live"),
    [
        (Send("status:1", "⏳ working…", buttons=STOP), True),
        (Edit("status:1", "⏳ working… · 5s", buttons=STOP), True),
        (Edit("status:1", "✅ done · 6s"), False),
        (Send("status:2", "✅ done · 1s"), False),  # its edits merged into the send
        (Delete("status:1"), False),
        (Send("text:1:1:0", "Hello", buttons=STOP), None),
        (Edit("crashed:17", CRASHED), None),
        (React("5", "working"), None),
    ],
)
def test_a_status_op_with_buttons_is_a_live_run_and_without_an_ended_one(
    op: Op, live: bool | None
) -> None:
    assert run_is_live(op) is live


def test_a_crashed_status_is_edited_to_say_so_without_buttons() -> None:
    slot, edit = retire_after_crash("17")
    assert edit == Edit(slot, CRASHED)
    assert edit.buttons == ()
    assert not slot.startswith("status:")  # the recovery edit is no run of its own


# --- the outbox: adopted slots and observers --------------------------------------------


def on_fake_time() -> tuple[FakeClock, RecordingAdapter, Outbox]:
    """A recording platform and an outbox delivering to it, on one fake clock."""
    clock = FakeClock()
    platform = RecordingAdapter(PlatformLimits(), clock=clock)
    return clock, platform, Outbox(platform, clock=clock, sleep=clock.sleep)


@contextlib.asynccontextmanager
async def serving(outbox: Outbox, clock: FakeClock) -> AsyncIterator[None]:
    with anyio.fail_after(REAL_SECONDS):
        async with anyio.create_task_group() as tg:
            await tg.start(clock.autojump)
            await tg.start(outbox.run)
            yield
            await outbox.flush()
            tg.cancel_scope.cancel()


async def an_earlier_message(platform: RecordingAdapter, text: str) -> MessageRef:
    """A message the bridge's previous process sent."""
    return await platform.send(CHAT, text, buttons=STOP)


async def test_an_adopted_message_is_edited_in_place() -> None:
    clock, platform, outbox = on_fake_time()
    ref = await an_earlier_message(platform, "⏳ working…")
    async with serving(outbox, clock):
        slot, edit = retire_after_crash(ref.message_id)
        outbox.adopt(KEY, slot, ref)
        outbox.submit(KEY, CHAT, [edit])
    assert platform.messages[ref].text == CRASHED
    assert platform.messages[ref].buttons == ()
    assert len(platform.calls_of("edit", ok=True)) == 1


async def test_an_adopted_message_that_is_gone_is_not_posted_again() -> None:
    clock, platform, outbox = on_fake_time()
    ref = await an_earlier_message(platform, "⏳ working…")
    platform.vanish(ref)
    async with serving(outbox, clock):
        slot, edit = retire_after_crash(ref.message_id)
        outbox.adopt(KEY, slot, ref)
        outbox.submit(KEY, CHAT, [edit])
    assert len(platform.calls_of("send")) == 1  # only the earlier process's
    [edit_call] = platform.calls_of("edit")
    assert isinstance(edit_call.error, MessageGone)
    assert outbox.stats.dropped == 0


async def test_an_observer_hears_each_op_carried_out_in_order_with_its_message() -> None:
    clock, _platform, outbox = on_fake_time()
    heard: list[tuple[str, str | None]] = []

    async def observer(key: str, chat: ChatRef, op: Op, ref: MessageRef | None) -> None:
        assert (key, chat) == (KEY, CHAT)
        heard.append((type(op).__name__, ref.message_id if ref else None))

    outbox.observe(observer)
    async with serving(outbox, clock):
        for op in (Send("s", "one", buttons=STOP), Edit("s", "two"), Delete("s")):
            outbox.submit(KEY, CHAT, [op])
            await outbox.flush()  # queued together, the Delete would cancel the Edit
    assert heard == [("Send", "1"), ("Edit", "1"), ("Delete", None)]


# --- LiveRuns: the store's record follows the status message ----------------------------


@contextlib.asynccontextmanager
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = await open_store("sqlite", tmp_path)
    try:
        yield store
    finally:
        await store.aclose()


async def test_a_run_is_recorded_from_its_status_send_until_its_final_edit(
    tmp_path: Path,
) -> None:
    clock, _platform, outbox = on_fake_time()
    async with sqlite_store(tmp_path) as store:
        outbox.observe(LiveRuns(store, wall=lambda: 1_700_000_000.0).delivered)
        async with serving(outbox, clock):
            outbox.submit(KEY, CHAT, [Send("status:1", "⏳ working…", buttons=STOP)])
            await outbox.flush()
            record = LiveRunRecord(
                key=KEY,
                chat_id="100",
                thread_id="7",
                is_group=True,
                message_id="1",
                started_at=1_700_000_000.0,
            )
            assert await store.live_runs() == [record]
            outbox.submit(KEY, CHAT, [Edit("status:1", "⏳ working… · 5s", buttons=STOP)])
            await outbox.flush()
            assert await store.live_runs() == [record]
            outbox.submit(KEY, CHAT, [Edit("status:1", "✅ done · 6s")])
            await outbox.flush()
            assert await store.live_runs() == []


WORKING, DONE = React("m5", "working"), React("m5", "done")
LIVE = Send("status:1", "⏳ working…", buttons=STOP)
OVER = Edit("status:1", "✅ done · 6s")


@pytest.mark.parametrize(
    ("ops", "working_on"),
    [
        ([WORKING, LIVE], ["m5"]),
        ([LIVE, WORKING], ["m5"]),  # reactions have their own lane: either may land first
        ([LIVE], []),  # reactions refused or off: nothing to mark
        ([WORKING, LIVE, DONE], []),
        ([WORKING, DONE, LIVE], []),  # an earlier prompt's run, done before this one
        ([WORKING, LIVE, React("m4", "done")], ["m5"]),  # another message's end
        ([WORKING, LIVE, React("m6", "working")], ["m5", "m6"]),  # a steer joined the run
        ([WORKING, LIVE, React("m6", "working"), DONE], ["m6"]),
    ],
)
async def test_the_record_names_the_users_messages_marked_as_being_worked_on(
    ops: list[Op], working_on: list[str], tmp_path: Path
) -> None:
    clock, _platform, outbox = on_fake_time()
    async with sqlite_store(tmp_path) as store:
        outbox.observe(LiveRuns(store, wall=lambda: 0.0).delivered)
        async with serving(outbox, clock):
            for op in ops:
                outbox.submit(KEY, CHAT, [op])
                await outbox.flush()
            (record,) = await store.live_runs()
            assert record.working_on == working_on
            outbox.submit(KEY, CHAT, [OVER])
        assert await store.live_runs() == []


async def test_retiring_edits_each_left_over_run_once_and_forgets_it(tmp_path: Path) -> None:
    clock, platform, outbox = on_fake_time()
    ref = await an_earlier_message(platform, "⏳ working…")
    async with sqlite_store(tmp_path) as store:
        await store.put_live_run(
            LiveRunRecord(
                key=KEY,
                chat_id=CHAT.chat_id,
                thread_id=CHAT.thread_id,
                is_group=True,
                message_id=ref.message_id,
                started_at=0.0,
                working_on=["m5", "m6"],
            )
        )
        live_runs = LiveRuns(store, wall=lambda: 0.0)
        outbox.observe(live_runs.delivered)
        async with serving(outbox, clock):
            assert await live_runs.retire(outbox) == 1
            assert await live_runs.retire(outbox) == 0
        assert await store.live_runs() == []
    assert platform.messages[ref].edits == [CRASHED]
    assert platform.messages[ref].buttons == ()
    # 👀 no more: the run never ended.
    assert platform.reactions == [("m5", "failed"), ("m6", "failed")]


async def test_a_bridge_retires_only_its_own_platforms_runs(tmp_path: Path) -> None:
    clock, platform, outbox = on_fake_time()
    ref = await an_earlier_message(platform, "⏳ working…")
    slack_key = "slack:T1:C1:170.1"
    async with sqlite_store(tmp_path) as store:
        for key, chat in ((KEY, CHAT), (slack_key, ChatRef("C1", "170.1"))):
            record = LiveRunRecord(
                key=key,
                chat_id=chat.chat_id,
                thread_id=chat.thread_id,
                is_group=chat.is_group,
                message_id=ref.message_id,
                started_at=0.0,
            )
            await store.put_live_run(record)
        live_runs = LiveRuns(store, wall=lambda: 0.0)
        async with serving(outbox, clock):
            assert await live_runs.retire(outbox, "tg:") == 1
        assert [r.key for r in await store.live_runs()] == [slack_key]
    assert platform.messages[ref].edits == [CRASHED]


# --- end to end: a bridge that dies mid-run, and the next one ---------------------------


@contextlib.asynccontextmanager
async def bridge(
    opts: BridgeOptions, platform: RecordingAdapter, *, dies: bool = False
) -> AsyncIterator[BridgeHarness]:
    """A bridge process on `opts.data_dir` serving the chat `platform` keeps across
    processes. With `dies`, the block's end is a SIGKILL: the bridge's tasks are
    cancelled and its drain (which marks live runs interrupted) never runs."""
    store = await open_store("sqlite", opts.data_dir)
    try:
        if not dies:
            async with Bridge(platform, store, opts) as running:
                yield BridgeHarness(running, platform)
            return
        running = await Bridge(platform, store, opts).__aenter__()
        try:
            yield BridgeHarness(running, platform)
        finally:
            tasks = running._tg  # what a killed process loses: every task, at once
            assert tasks is not None
            tasks.cancel_scope.cancel()
            await tasks.__aexit__(None, None, None)
    finally:
        await store.aclose()


def slow_job(fake_llm: FakeLLM) -> None:
    script_long_run(fake_llm, "long job")


async def live_status(chat: BridgeHarness) -> MessageRef:
    """The run's status message, once the store has recorded it as live."""
    await chat.shown("🔧 bash")
    status = chat.adapter.find("⏳ working")
    assert status.buttons, "a live status has its [Stop] button"
    with anyio.fail_after(10):
        while not await chat.bridge.store.live_runs():  # noqa: ASYNC110 (polls the store)
            await anyio.sleep(0.02)
    return status.ref


@pytest.mark.agent
async def test_a_restarted_bridge_retires_the_run_a_killed_one_left_live(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("remember", Reply(text="Noted: PLUM."))
    slow_job(fake_llm)
    fake_llm.add("what fruit", Reply(text="It was PLUM."))
    opts = options(tmp_path / "data", agent_home.argv(version), agent_home.env())
    platform = RecordingAdapter(limits=LIMITS)
    try:
        async with bridge(opts, platform, dies=True) as chat:
            await chat.say("remember PLUM")
            await chat.shown("Noted: PLUM.")
            await chat.idle()
            await chat.say("start the long job")
            status = await live_status(chat)
        # The kill left it as it was, and took the agent with it.
        assert "⏳ working" in platform.messages[status].text
        assert platform.messages[status].buttons
        assert not agent_processes(opts.data_dir)

        (asked, _) = [r for r in platform.reactions if r[1] == "working"][-1]
        assert (asked, "done") not in platform.reactions
        async with bridge(opts, platform) as chat:
            await chat.until(lambda: platform.messages[status].text == CRASHED)
            assert platform.messages[status].buttons == ()
            await chat.until(lambda: (asked, "failed") in platform.reactions)
            await chat.say("what fruit did I say?")
            await chat.shown("It was PLUM.")
            await chat.idle()
            assert await chat.bridge.store.live_runs() == []

        # Retired once: a further restart leaves the message alone.
        async with bridge(opts, platform) as chat:
            await chat.bridge.outbox.flush()
        edits = [c for c in platform.calls_of("edit") if c.ref == status]
        assert [c.text for c in edits if c.text == CRASHED] == [CRASHED]
        assert edits[-1].text == CRASHED
        assert not agent_processes(opts.data_dir)
    finally:
        kill_agents(opts.data_dir)
    resumed = next(r for r in fake_llm.requests if "what fruit" in r.last_user_text)
    assert any("remember PLUM" in str(m) for m in resumed.messages)


@pytest.mark.agent
async def test_a_drained_bridge_leaves_no_run_for_the_next_one_to_retire(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    slow_job(fake_llm)
    opts = options(tmp_path / "data", agent_home.argv(version), agent_home.env(), drain_timeout=0.1)
    platform = RecordingAdapter(limits=LIMITS)
    try:
        async with bridge(opts, platform) as chat:
            await chat.say("start the long job")
            status = await live_status(chat)
        assert "the bridge is restarting" in platform.messages[status].text
        async with bridge(opts, platform) as chat:
            assert await chat.bridge.store.live_runs() == []
            await chat.bridge.outbox.flush()
        assert "the bridge is restarting" in platform.messages[status].text
        assert not agent_processes(opts.data_dir)
    finally:
        kill_agents(opts.data_dir)

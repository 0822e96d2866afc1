"""Scheduled work end to end: /every, /at and /schedules in a chat (recording adapter),
the real pi agent on the fake LLM, and a clock the test turns (the bridge's `wall`):
no test waits for the hour a schedule names. Each test calls the ticker itself after
turning the clock, as its loop would every `[schedules] tick`.

The chat's zone is Europe/Berlin (`[chats."test:1"] timezone`); the clock starts on
Friday 27 November 2026, 10:00 there.
"""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import anyio
import pytest

from bridge.app.metrics import Metrics
from bridge.options import ChatOptions, ScheduleOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.bridge_harness import (
    KEY,
    LIMITS,
    OWNER,
    STRANGER,
    BridgeHarness,
    options,
)
from tests.support.fake_llm import Reply
from tests.support.journeys import UNSTEERED, requests_with, script_steerable_run
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.options import BridgeOptions
    from bridge.store.base import Store
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 11, 27, 10, 0, tzinfo=BERLIN).timestamp()  # a Friday
MONDAY_NINE = datetime(2026, 11, 30, 9, 0, tzinfo=BERLIN).timestamp()
ANSWER = "KIWI report: all green."


class Clock:
    """The bridge's wall clock, turned by the test."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def schedule_options(home: AgentHome, tmp_path: Path, **schedules: object) -> BridgeOptions:
    from tests.conftest import require_agent
    from tests.support.agents import DEFAULT_VERSION

    require_agent(DEFAULT_VERSION)
    opts = options(tmp_path / "data", home.argv(DEFAULT_VERSION), home.env())
    return dataclasses.replace(
        opts,
        chats={KEY: ChatOptions(timezone="Europe/Berlin")},
        schedules=ScheduleOptions(**schedules),  # type: ignore[arg-type]
    )


@contextlib.asynccontextmanager
async def scheduled_bridge(
    opts: BridgeOptions, clock: Clock, store: Store | None = None
) -> AsyncIterator[BridgeHarness]:
    own = store is None
    if store is None:
        store = await open_store("sqlite", opts.data_dir)
    try:
        async with Bridge(RecordingAdapter(limits=LIMITS), store, opts, wall=clock) as bridge:
            assert isinstance(bridge.adapter, RecordingAdapter)
            yield BridgeHarness(bridge, bridge.adapter)
    finally:
        if own:
            await store.aclose()


async def tick(chat: BridgeHarness) -> None:
    assert chat.bridge.ticker is not None
    await chat.bridge.ticker.tick()


def fired(chat: BridgeHarness) -> tuple[int, int, int]:
    assert chat.bridge.ticker is not None
    stats = chat.bridge.ticker.stats
    return stats.fired, stats.missed, stats.failed


async def make_schedule(chat: BridgeHarness, command: str, sender: object = OWNER) -> None:
    """`command` (/every or /at), confirmed by its maker."""
    made = chat.all_text().count("\n/schedules")
    await chat.say(command, sender)  # type: ignore[arg-type]
    await chat.press("Schedule", sender)  # type: ignore[arg-type]
    await chat.until(lambda: chat.all_text().count("\n/schedules") > made)


async def test_every_shows_the_next_three_runs_and_fires_once_as_an_ordinary_run(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("SCHEDULED-KIWI", Reply(text=ANSWER))
    clock = Clock()
    async with scheduled_bridge(schedule_options(agent_home, tmp_path), clock) as chat:
        await chat.say("/every weekdays 9:00 SCHEDULED-KIWI check CI")
        asked = await chat.shown("Schedule it?")
        assert "⏰ weekdays 09:00 (Europe/Berlin): SCHEDULED-KIWI check CI" in asked
        assert "Next: Mon 30 Nov 09:00, Tue 01 Dec 09:00, Wed 02 Dec 09:00" in asked
        await tick(chat)  # a draft never fires
        assert fired(chat) == (0, 0, 0)
        await chat.press("Schedule")
        await chat.shown("✅ scheduled")
        clock.now = MONDAY_NINE - 60
        await tick(chat)
        assert fired(chat) == (0, 0, 0)
        clock.now = MONDAY_NINE + 5
        await tick(chat)
        await tick(chat)  # the same occurrence again: nothing
        await chat.shown("⏰ scheduled: weekdays 09:00 — SCHEDULED-KIWI check CI")
        await chat.shown(ANSWER)
        await chat.idle()
        assert fired(chat) == (1, 0, 0)
        assert requests_with(fake_llm, "SCHEDULED-KIWI") == 1
        clock.now = MONDAY_NINE + 24 * 3600 + 1  # Tuesday's
        await tick(chat)
        await chat.until(lambda: requests_with(fake_llm, "SCHEDULED-KIWI") == 2)
        await chat.idle()
        assert chat.all_text().count(ANSWER) == 2


async def test_a_run_due_while_the_agent_works_waits_in_the_queue_behind_it(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_steerable_run(fake_llm)
    fake_llm.add("SCHEDULED-KIWI", Reply(text=ANSWER))
    clock = Clock()
    async with scheduled_bridge(schedule_options(agent_home, tmp_path), clock) as chat:
        await make_schedule(chat, "/at in 30m SCHEDULED-KIWI after the slow one")
        await chat.say("do it slowly")  # policy "steer": a message now would steer it
        await chat.shown("🔧 bash")
        clock.now = START + 30 * 60 + 1
        await tick(chat)
        queued = await chat.shown("⏭ waiting for the end of the run")
        assert "SCHEDULED-KIWI" in queued
        await chat.button("Steer now", contains="SCHEDULED-KIWI")  # the queue's own buttons
        await chat.shown(UNSTEERED)  # the slow run was not steered
        await chat.shown(ANSWER)
        await chat.idle()
        assert requests_with(fake_llm, "SCHEDULED-KIWI") == 1
        assert fired(chat) == (1, 0, 0)
        assert await chat.bridge.store.schedules() == []  # a one-shot is done


async def test_after_downtime_a_run_less_than_catch_up_late_runs_at_start_and_older_are_missed(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("SCHEDULED-KIWI", Reply(text=ANSWER))
    fake_llm.add("SCHEDULED-FIG", Reply(text="Fig done."))
    opts = schedule_options(agent_home, tmp_path, catch_up=3600)
    clock = Clock()
    async with scheduled_bridge(opts, clock) as chat:
        await make_schedule(chat, "/every 9:00 SCHEDULED-KIWI daily report")
        await make_schedule(chat, "/every mon 8:00 SCHEDULED-FIG weekly")
    # Down over the weekend until Monday 09:40: Sat, Sun and Mon 09:00 came due, and
    # Mon 08:00; only Monday's 09:00 is less than an hour late.
    clock.now = MONDAY_NINE + 40 * 60
    async with scheduled_bridge(opts, clock) as chat:
        await chat.shown(ANSWER)  # the first tick, at start
        missed = await chat.shown("⏰ missed: daily 09:00")
        assert "2 runs" in missed
        assert "Sun 29 Nov 09:00" in missed
        await chat.shown("⏰ missed: mon 08:00 — a run")
        await chat.idle()
        await tick(chat)
        assert requests_with(fake_llm, "SCHEDULED-KIWI") == 1
        assert requests_with(fake_llm, "SCHEDULED-FIG") == 0
        assert fired(chat) == (1, 3, 0)
        metrics = Metrics()
        metrics.counting("test", chat.bridge)
        scraped = metrics.render()
        for outcome, count in (("fired", 1), ("missed", 3), ("failed", 0)):
            line = f'pi_bridge_scheduled_runs_total{{platform="test",outcome="{outcome}"}} {count}'
            assert line in scraped, scraped


async def test_only_the_maker_or_an_approver_pauses_resumes_or_deletes_a_schedule(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("SCHEDULED-KIWI", Reply(text=ANSWER))
    clock = Clock()
    async with scheduled_bridge(schedule_options(agent_home, tmp_path), clock) as chat:
        await make_schedule(chat, "/every weekdays 9:00 SCHEDULED-KIWI check CI")
        await chat.say("/schedules", STRANGER)
        await chat.shown("by alice")
        await chat.press("Pause", STRANGER)
        await chat.until(lambda: any("Only the person" in a[1] for a in chat.adapter.answers))
        await chat.button("Pause")  # still there: the refused press changed nothing
        await chat.press("Pause")
        await chat.shown("⏸ paused")
        clock.now = MONDAY_NINE + 5
        await tick(chat)
        assert fired(chat) == (0, 0, 0)
        await chat.say("/schedules")
        await chat.press("Resume")
        await chat.shown("▶ resumed")
        await tick(chat)  # Monday's run came while paused: neither run nor missed
        assert fired(chat) == (0, 0, 0)
        clock.now += 24 * 3600
        await tick(chat)
        await chat.shown(ANSWER)
        await chat.idle()
        await chat.say("/schedules")
        await chat.press("Delete")
        await chat.shown("🗑 deleted")
        assert await chat.bridge.store.schedules() == []


async def test_a_maker_no_longer_allowed_gets_no_run_and_one_person_has_a_capped_number(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("SCHEDULED-KIWI", Reply(text=ANSWER))
    opts = schedule_options(agent_home, tmp_path, max_per_user=1)
    clock = Clock()
    async with scheduled_bridge(opts, clock) as chat:
        await make_schedule(chat, "/every 9:00 SCHEDULED-KIWI mine", STRANGER)
        await chat.say("/every 10:00 SCHEDULED-KIWI a second one", STRANGER)
        await chat.shown("You have 1 schedules already")
    narrowed = dataclasses.replace(opts, allowed_users=frozenset({OWNER.id}))
    clock.now = datetime(2026, 11, 28, 9, 0, 30, tzinfo=BERLIN).timestamp()
    async with scheduled_bridge(narrowed, clock) as chat:
        await tick(chat)
        assert fired(chat)[0] == 0
        assert fired(chat)[2] >= 1
        await anyio.sleep(0.5)
        assert requests_with(fake_llm, "SCHEDULED-KIWI") == 0


async def test_tz_changes_the_zone_new_schedules_are_shown_in(
    agent_home: AgentHome, tmp_path: Path
) -> None:
    clock = Clock()
    async with scheduled_bridge(schedule_options(agent_home, tmp_path), clock) as chat:
        await chat.say("/tz")
        await chat.shown("time zone is Europe/Berlin")
        await chat.say("/tz Mars/Olympus")
        await chat.shown("I don't know the time zone")
        await chat.say("/tz America/New_York")
        await chat.shown("Time zone: America/New_York")
        await chat.say("/at tomorrow 8:00 wake up")
        asked = await chat.shown("Schedule it?")
        assert "(America/New_York)" in asked
        assert "Sat 28 Nov 08:00" in asked


async def test_an_approver_may_change_a_schedule_someone_else_made(
    agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = dataclasses.replace(
        schedule_options(agent_home, tmp_path), approvers=frozenset({STRANGER.id})
    )
    async with scheduled_bridge(opts, Clock()) as chat:
        await make_schedule(chat, "/at tomorrow 8:00 SCHEDULED-KIWI deploy")
        await chat.say("/schedules", STRANGER)
        await chat.press("Delete", STRANGER)
        await chat.shown("🗑 deleted")
        assert await chat.bridge.store.schedules() == []
        assert not any("Only the person" in answer[1] for answer in chat.adapter.answers)

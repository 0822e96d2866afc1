"""Scheduled work on Telegram, end to end: python-telegram-bot against the fake Bot API,
the real agent, and a clock the test turns. /every is confirmed with its button,
/schedules' [⏸ Pause] [▶ Resume] [🗑 Delete] are pressed as a person would (Mallory,
who did not make it, is refused privately and the buttons stay), and the run fires
into the chat as "⏰ scheduled" followed by the agent's answer."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import anyio
import pytest

from adapters.telegram.runner import serve
from adapters.telegram.settings import TelegramSettings
from bridge.controls.schedules import NOT_YOURS
from bridge.options import ChatOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.adapters.telegram.test_e2e import CHAT, WAIT
from tests.support.fake_llm import Reply
from tests.support.fake_telegram import TOKEN, FakeTelegram

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 11, 27, 10, 0, tzinfo=BERLIN).timestamp()  # a Friday
MONDAY_NINE = datetime(2026, 11, 30, 9, 0, tzinfo=BERLIN).timestamp()
MALLORY = {"id": 7, "is_bot": False, "first_name": "Mallory", "username": "mallory"}
ANSWER = "CI is green."


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def telegram_bot(
    opts: BridgeOptions, clock: Clock
) -> AsyncIterator[tuple[FakeTelegram, list[Bridge]]]:
    made: list[Bridge] = []

    @contextlib.asynccontextmanager
    async def bridge_for(adapter: Adapter, bot_name: str) -> AsyncIterator[Bridge]:
        store = await open_store("sqlite", opts.data_dir)
        try:
            async with Bridge(adapter, store, opts, bot_name=bot_name, wall=clock) as bridge:
                made.append(bridge)
                yield bridge
        finally:
            await store.aclose()

    async with FakeTelegram(enforce_limits=True) as fake:
        settings = TelegramSettings(
            token=TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url, poll_timeout=1
        )
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve(settings, bridge_for, stop=stop))
            try:
                await fake.wait_for(lambda: made, WAIT)
                yield fake, made
            finally:
                stop.set()


def token(message: Message, label: str) -> str:
    return next(data for text, data in message.buttons if label in text)


async def pressed(
    fake: FakeTelegram, message: Message, label: str, **user: object
) -> tuple[str, bool]:
    query = fake.press(CHAT, message.message_id, token(message, label), **user)  # type: ignore[arg-type]
    await fake.wait_for(lambda: query in fake.answers, WAIT)
    return fake.answers[query]


async def test_a_schedule_is_confirmed_paused_resumed_and_deleted_with_its_buttons(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("TG-SCHEDULED", Reply(text=ANSWER))
    opts = dataclasses.replace(
        opts,
        allowed_users=frozenset({str(CHAT), "7"}),
        chats={f"tg:{CHAT}": ChatOptions(timezone="Europe/Berlin")},
    )
    clock = Clock()
    async with telegram_bot(opts, clock) as (fake, bridges):
        ticker = bridges[0].ticker
        assert ticker is not None
        fake.message(CHAT, "/every weekdays 9:00 TG-SCHEDULED check CI")
        asked = await fake.bot_message("Schedule it?", CHAT, within=WAIT)
        assert "Next: Mon 30 Nov 09:00, Tue 01 Dec 09:00, Wed 02 Dec 09:00" in asked.text
        assert (await pressed(fake, asked, "Schedule", user=MALLORY)) == (NOT_YOURS, True)
        assert fake.messages[(CHAT, asked.message_id)].buttons == asked.buttons
        await pressed(fake, asked, "Schedule")
        await fake.bot_message("✅ scheduled", CHAT, within=WAIT)

        fake.message(CHAT, "/schedules")
        listed = await fake.bot_message("by Alice", CHAT, within=WAIT)
        assert [label for label, _ in listed.buttons] == ["⏸ Pause", "🗑 Delete"]
        assert (await pressed(fake, listed, "Pause", user=MALLORY)) == (NOT_YOURS, True)
        await pressed(fake, listed, "Pause")
        await fake.wait_for(lambda: "⏸ paused" in fake.messages[(CHAT, listed.message_id)].text)
        clock.now = MONDAY_NINE + 5
        await ticker.tick()
        assert ticker.stats.fired == 0

        fake.message(CHAT, "/schedules")
        paused = await fake.bot_message("⏸ paused · by Alice", CHAT, within=WAIT)
        await pressed(fake, paused, "Resume")
        await fake.wait_for(lambda: "▶ resumed" in fake.messages[(CHAT, paused.message_id)].text)
        clock.now += 24 * 3600  # Tuesday's run
        await ticker.tick()
        await fake.bot_message(
            "⏰ scheduled: weekdays 09:00 — TG-SCHEDULED check CI", CHAT, within=WAIT
        )
        await fake.bot_message(ANSWER, CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)

        fake.message(CHAT, "/schedules")
        again = await fake.bot_message("Next: Wed 02 Dec 09:00", CHAT, within=WAIT)
        await pressed(fake, again, "Delete")
        await fake.wait_for(lambda: "🗑 deleted" in fake.messages[(CHAT, again.message_id)].text)
        assert await bridges[0].store.schedules() == []
        clock.now += 24 * 3600
        await ticker.tick()
        assert ticker.stats.fired == 1

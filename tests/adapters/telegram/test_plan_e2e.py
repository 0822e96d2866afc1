"""Plan first on Telegram: fake Bot API → real python-telegram-bot → `Bridge` → real pi
agent with the shipped gate → the fake LLM. Telegram has no forms, so [✏ Revise…]
asks for the change as the next message; a stranger's press is refused."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.plans import ASK_REVISION
from bridge.options import safe_name
from tests.adapters.telegram.test_e2e import CHAT, WAIT, telegram_bot
from tests.support.bridge_harness import options
from tests.support.fake_telegram import FakeTelegram
from tests.test_plan_e2e import script

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

MALLORY = {"id": 66, "is_bot": False, "first_name": "Mallory", "username": "mallory"}


def data(message: Message, label: str) -> str:
    [found] = [d for text, d in message.buttons if label in text]
    return found


async def test_a_plan_shows_its_buttons_takes_a_revision_by_message_and_runs(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm)
    opts = options(
        tmp_path / "data",
        agent_home.argv(version),
        agent_home.env(),
        allowed_users=frozenset({str(CHAT), str(MALLORY["id"])}),
    )
    workspace = tmp_path / "data" / "workspaces" / safe_name(f"tg:{CHAT}")
    async with FakeTelegram(enforce_limits=True) as fake, telegram_bot(opts, on=fake):
        fake.message(CHAT, "/plan put a pear in the workspace")
        plan = await fake.bot_message("☐ 2. Write pear.txt", CHAT, within=WAIT)
        await fake.wait_for(lambda: len(plan.buttons) == 3, WAIT)
        assert [label for label, _ in plan.buttons] == ["▶ Execute", "✏ Revise…", "✖ Cancel"]

        fake.press(CHAT, plan.message_id, data(plan, "Execute"), user=MALLORY)
        refused = lambda: any("Only the person" in t for t, _ in fake.answers.values())  # noqa: E731
        await fake.wait_for(refused, WAIT)
        assert len(plan.buttons) == 3
        assert not (workspace / "pear.txt").exists()

        fake.press(CHAT, plan.message_id, data(plan, "Revise"))
        await fake.bot_message(ASK_REVISION, CHAT, within=WAIT)
        fake.message(CHAT, "add a plum too")
        again = await fake.bot_message("☐ 3. Write plum.txt", CHAT, within=WAIT)
        await fake.wait_for(lambda: len(again.buttons) == 3, WAIT)
        assert plan.buttons == []

        fake.press(CHAT, again.message_id, data(again, "Execute"))
        await fake.wait_for((workspace / "pear.txt").exists, WAIT)
        await fake.wait_for(lambda: "2 of 3 steps ticked" in again.text, WAIT)
        assert again.buttons == []

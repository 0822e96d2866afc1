"""Notifications end to end on Telegram: fake Bot API → real python-telegram-bot →
`Bridge` → real pi agent (with the approval gate) → the fake LLM.

Only two messages may notify the person who started a run: a question waiting for
them and the end of the run; everything else (the status, tools, the answer, edits) is
sent with `disable_notification`, as the fake records (`Message.notified`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.model import NotifySettings
from bridge.options import ApprovalOptions
from tests.adapters.telegram.test_e2e import CHAT, FORUM, TOPIC, WAIT, telegram_bot
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import ALICE, FakeTelegram

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

ASKED = "Approve this"


def notified(fake: FakeTelegram, chat: int) -> list[Message]:
    return [m for m in fake.bot_messages(chat) if m.notified]


def clean_up(fake_llm: FakeLLM) -> None:
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build && echo gone"})]),
        Reply(text="Cleaned the build.\n\nNothing else was touched."),
    )


async def test_only_the_question_and_the_end_of_the_run_notify(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    clean_up(fake_llm)
    opts = options(
        tmp_path / "data",
        agent_home.argv(version),
        agent_home.env(),
        approvals=ApprovalOptions(mode="dangerous"),
        notify=NotifySettings(quiet_under=0),  # every run is long enough to ping its end
    )
    async with FakeTelegram() as fake, telegram_bot(opts, on=fake):
        fake.message(CHAT, "clean please")
        question = await fake.bot_message(ASKED, CHAT, within=WAIT)
        assert question.notified  # a private chat: the question itself is the ping
        [allow] = [data for text, data in question.buttons if text == "✅ Allow once"]
        fake.press(CHAT, question.message_id, allow)
        await fake.wait_for(lambda: len(notified(fake, CHAT)) == 2, WAIT)
        ping = notified(fake, CHAT)[1]
        assert ping.text.startswith("✅ done · ")
        assert "1 tool" in ping.text
        assert ping.text.endswith(": Cleaned the build.")  # the answer's first line
        answer = await fake.bot_message("Nothing else was touched.", CHAT, within=WAIT)
        assert not answer.notified
        quiet = [m for m in fake.bot_messages(CHAT) if not m.notified]
        assert any(m.text.startswith("⏳") or "bash" in m.text for m in quiet)  # progress
        assert [m.message_id for m in notified(fake, CHAT)] == [
            question.message_id,
            ping.message_id,
        ]
    sent = [c for c in fake.calls if c.method == "sendMessage"]
    assert sum(1 for c in sent if c.params.get("disable_notification") is False) == 2


async def test_in_a_group_the_question_mentions_its_person_and_a_quick_run_ends_quietly(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    clean_up(fake_llm)
    opts = options(
        tmp_path / "data",
        agent_home.argv(version),
        agent_home.env(),
        approvals=ApprovalOptions(mode="dangerous"),
        notify=NotifySettings(quiet_under=600),  # the person is still looking
    )
    async with FakeTelegram() as fake, telegram_bot(opts, on=fake):
        fake.message(FORUM, "@pi_test_bot clean please", thread_id=TOPIC)
        question = await fake.bot_message(ASKED, FORUM, within=WAIT)
        assert question.notified
        assert question.mentions == [ALICE["id"]]
        assert question.text.startswith("Alice ")
        [allow] = [data for text, data in question.buttons if text == "✅ Allow once"]
        fake.press(FORUM, question.message_id, allow)
        await fake.bot_message("Nothing else was touched.", FORUM, within=WAIT)
        await fake.bot_message("✅ done", FORUM, within=WAIT)
        assert notified(fake, FORUM) == [question]  # no end ping: the run was quick

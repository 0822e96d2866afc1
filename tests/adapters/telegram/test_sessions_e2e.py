"""/sessions end to end on Telegram: fake Bot API → real python-telegram-bot → `Bridge`
→ real pi agent (0.73.1, 0.87.1, and the legacy 0.13.2) → the fake LLM. (The legacy
agent across a bridge restart: tests/controls/test_sessions.py.)

What a resumed session brings back is read from the fake LLM's requests: the
history the agent sends with the next prompt.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.adapters.telegram.test_e2e import CHAT, WAIT, telegram_bot
from tests.conftest import require_agent
from tests.controls.test_sessions import history_of, legacy_options, saved, script
from tests.support.agents import AGENT_VERSIONS
from tests.support.bridge_harness import options

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import FakeTelegram

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

LISTED = "newest first"


async def answered(fake: FakeTelegram, text: str, answer: str, runs: int) -> None:
    """Send `text`; return once `answer` is shown and the chat's `runs`-th run is over."""
    fake.message(CHAT, text)
    await fake.bot_message(answer, CHAT, within=WAIT)
    await fake.wait_for(
        lambda: sum("✅ done" in m.text for m in fake.bot_messages(CHAT)) >= runs, WAIT
    )


async def resume(fake: FakeTelegram, label: str) -> tuple[str, list[str]]:
    """/sessions, then press `label`; the list's text and buttons as they were shown
    (the press closes the list)."""
    fake.message(CHAT, "/sessions")
    listed = await fake.bot_message(LISTED, CHAT, within=WAIT)
    shown = listed.text, [label for label, _ in listed.buttons]
    [(_, token)] = [b for b in listed.buttons if b[0] == label]
    fake.press(CHAT, listed.message_id, token)
    await fake.bot_message("Resumed", CHAT, within=WAIT)
    return shown


@pytest.mark.parametrize("version", AGENT_VERSIONS)
async def test_resume_brings_an_older_sessions_history_back_to_the_agent(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path, version: str
) -> None:
    require_agent(version)
    script(fake_llm)
    opts = options(tmp_path / "data", agent_home.argv(version), agent_home.env())
    async with telegram_bot(opts) as fake:
        await answered(fake, "remember kiwi", "Kiwi noted.", runs=1)
        fake.message(CHAT, "/new")
        await fake.bot_message("New session started", CHAT, within=WAIT)
        await answered(fake, "remember mango", "Mango noted.", runs=2)
        listed, buttons = await resume(fake, "Resume 2")
        await answered(fake, "which fruit did I name?", "The fruit you named.", runs=3)
    assert buttons == ["Resume 1", "Resume 2"]
    mango, kiwi = listed.split("\n")[1::2]
    assert mango == "1. “remember mango”  ◀ current"
    assert kiwi == "2. “remember kiwi”"
    # The fake model has prices (tests/support/agents.py): each session cost something.
    assert len(re.findall(r" · 2 messages · \$0\.\d\d", listed)) == 2, listed
    history = history_of(fake_llm, "which fruit")
    assert "remember kiwi" in history
    assert "Kiwi noted." in history
    assert "remember mango" not in history


async def test_resume_restarts_the_legacy_agent_on_the_chosen_session(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = legacy_options(agent_home, tmp_path)
    script(fake_llm)
    async with telegram_bot(opts) as fake:
        await answered(fake, "remember mango", "Mango noted.", runs=1)
        saved(opts, "pi-0.13.2.jsonl", 1_000_000_000.0, key=f"tg:{CHAT}")
        listed, _ = await resume(fake, "Resume 2")
        await answered(fake, "which fruit did I name?", "The fruit you named.", runs=2)
    assert listed.split("\n")[3] == "2. “remember kiwi please”"
    history = history_of(fake_llm, "which fruit")
    assert "remember kiwi please" in history
    assert "remember mango" not in history

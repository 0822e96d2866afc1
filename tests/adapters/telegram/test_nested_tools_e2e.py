"""Nested tool calls on Telegram: fake Bot API (its 4096-character limit, its edit
pacing) → python-telegram-bot → Bridge → real pi 1.5.2 running the suite's
`fanout.ts` tool, which runs `tick` 200 times through `ctx.executeTool()`. The chat
gets one tool message whose sub-lines show the newest calls and count the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.adapters.telegram.test_e2e import CHAT, telegram_bot
from tests.conftest import require_agent
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import MAX_TEXT
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

NESTING_VERSION = "1.5.2"  # the first pinned agent with ctx.executeTool()
WAIT = 90.0


async def test_two_hundred_nested_calls_are_one_telegram_message_within_its_limit(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(NESTING_VERSION)
    call = ToolCall("fanout", {"count": 200, "failEvery": 40}, id="call_fan")
    fake_llm.add("fan", Reply(tool_calls=[call]), Reply(text="Fanned out."))
    argv = agent_home.argv(NESTING_VERSION, "-e", str(EXTENSIONS / "fanout.ts"))
    opts = options(tmp_path / "data", argv, agent_home.env())
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "fan out please")
        await fake.bot_message("Fanned out.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        tool = await fake.bot_message("FANOUT-DONE", CHAT, within=WAIT)
    assert tool.text.startswith("✅ fanout"), tool.text
    assert "FANOUT-DONE 200 calls, 5 failed" in tool.text
    assert "… 188 earlier (184 ✓, 4 ✗)" in tool.text
    assert '↳ ✗ tick  {"n":200,' in tool.text  # the newest, which failed (code shown as such)
    assert len(tool.raw.encode("utf-16-le")) // 2 <= MAX_TEXT
    tool_messages = [m for m in fake.bot_messages(CHAT) if "tick" in m.text]
    assert tool_messages == [tool], [m.text for m in tool_messages]
    assert not [e for e in fake.errors if "too long" in e[1] or "Too Many" in e[1]], fake.errors

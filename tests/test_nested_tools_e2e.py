"""Nested tool calls end to end: the real pi 1.5.2 runs the suite's `fanout.ts` tool,
which runs `tick` 3 or 200 times through `ctx.executeTool()`; the bridge (recording
adapter) shows them as sub-lines of the one `fanout` message, never as messages of
their own, and the run's status counts one tool. Likewise the MCP tools pi's codemode
tool calls (a tiny stdio MCP server of the suite's, in the agent's `mcp.json`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import require_agent
from tests.support.bridge_harness import LIMITS, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

NESTING_VERSION = "1.5.2"  # the first pinned agent with ctx.executeTool()
FANOUT = EXTENSIONS / "fanout.ts"
WAIT = 90.0  # 200 nested calls on a shared machine


def script_fanout(fake_llm: FakeLLM, count: int, fail_every: int) -> None:
    call = ToolCall("fanout", {"count": count, "failEvery": fail_every}, id="call_fan")
    fake_llm.add("fan", Reply(tool_calls=[call]), Reply(text="Fanned out."))


def tool_messages(chat: BridgeHarness) -> list[str]:
    """The texts of the messages that show a tool call (not the run's status)."""
    return [
        m.text
        for m in chat.adapter.messages.values()
        if not m.deleted and ("fanout" in m.text or "tick" in m.text) and "done ·" not in m.text
    ]


@pytest.mark.parametrize(("count", "fail_every", "failed"), [(3, 2, 1), (200, 40, 5)])
async def test_a_tool_that_runs_tools_is_one_message_with_its_calls_as_sub_lines(
    count: int,
    fail_every: int,
    failed: int,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    require_agent(NESTING_VERSION)
    script_fanout(fake_llm, count, fail_every)
    argv = agent_home.argv(NESTING_VERSION, "-e", str(FANOUT))
    async with running_bridge(options(tmp_path / "data", argv, agent_home.env())) as chat:
        await chat.say("fan out please")
        await chat.shown("Fanned out.", within=WAIT)
        await chat.idle(within=WAIT)
        [tool] = tool_messages(chat) or [chat.all_text()]
        assert tool.startswith("✅ fanout"), tool
        assert f"FANOUT-DONE {count} calls, {failed} failed" in tool
        assert f'tick  `{{"n":{count},' in tool  # the newest call is shown
        assert "↳ ✓ tick" in tool
        assert "↳ ✗ tick" in tool
        assert len(tool) <= LIMITS.max_text
        if count > 12:
            assert f"… {count - 12} earlier (" in tool
        status = chat.find("✅ done")
        assert status is not None
        assert "1 tool" in status, status
        assert not any(t.startswith(("🔧 tick", "✅ tick", "❌ tick")) for t in tool_messages(chat))


MCP_SERVER = Path(__file__).resolve().parent / "support" / "mcp_stdio_server.py"
SCRIPT = (
    "const a = await tools.mcp__local__shout({ text: 'hi' });\n"
    "await tools.mcp__local__refuse({});\n"
    "return JSON.stringify(a);"
)


async def test_mcp_tools_a_codemode_script_calls_are_sub_lines_of_its_message(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(NESTING_VERSION)
    server = {"command": sys.executable, "args": [str(MCP_SERVER)]}
    mcp = {"mcpServers": {"local": server}}
    (agent_home.agent_dir / "mcp.json").write_text(json.dumps(mcp), encoding="utf-8")
    call = ToolCall("codemode", {"code": SCRIPT}, id="call_code")
    fake_llm.add("script", Reply(tool_calls=[call]), Reply(text="Scripted."))
    argv = agent_home.argv(NESTING_VERSION)
    async with running_bridge(options(tmp_path / "data", argv, agent_home.env())) as chat:
        await chat.say("script it")
        await chat.shown("Scripted.", within=WAIT)
        await chat.idle(within=WAIT)
        [tool] = [
            m.text for m in chat.adapter.messages.values() if not m.deleted and "mcp__" in m.text
        ] or [chat.all_text()]
    assert tool.startswith("✅ codemode"), tool
    assert '↳ ✓ mcp__local__shout  `{"text":"hi"}`' in tool
    assert "↳ ✗ mcp__local__refuse" in tool
    assert "MCP-HI" in tool  # the script's output, under its calls

"""Nested tool calls as the real pi 1.5.2 sends them: a tool that runs tools
(`ctx.executeTool()`, the suite's `fanout.ts` extension), and pi's own codemode tool
calling the tools of an MCP server (tests/support/mcp_stdio_server.py, configured in
the agent's `mcp.json`), over RPC.

Pins the shape docs/rpc.md ("Nested tool calls") describes: each nested call's
`tool_execution_*` events carry `parentToolCallId`, its id is `<parent>/<n>` (a call
of a nested call one level further), a failure is `isError`, and every end comes
before its parent's. Runs on 1.5.2 only: older agents have no `executeTool`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge.rpc.events import ToolExecutionEnd, ToolExecutionStart
from bridge.rpc.signals import RunEnded
from tests.conftest import require_agent
from tests.support.agent_session import running, spec_for
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

NESTING_VERSION = "1.5.2"  # the first pinned agent with ctx.executeTool()
FANOUT = EXTENSIONS / "fanout.ts"


async def test_a_tool_that_runs_tools_reports_each_call_with_its_parent(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(NESTING_VERSION)
    args = {"count": 3, "failEvery": 3, "deep": True}
    fake_llm.add(
        "fan",
        Reply(tool_calls=[ToolCall("fanout", args, id="call_fan")]),
        Reply(text="Fanned out."),
    )
    spec = spec_for(agent_home, NESTING_VERSION, tmp_path / "ws", "-e", str(FANOUT))
    async with running(spec) as (agent, rec):
        await agent.prompt("fan out please")
        await rec.wait_for(RunEnded, within=60)
    starts = {e.toolCallId: e for e in rec.of(ToolExecutionStart)}
    ends = {e.toolCallId: e for e in rec.of(ToolExecutionEnd)}
    parents = {i: e.parentToolCallId for i, e in starts.items()}
    assert parents == {
        "call_fan": None,
        "call_fan/1": "call_fan",  # the nested fanout …
        "call_fan/1/1": "call_fan/1",  # … and the tick it ran
        "call_fan/2": "call_fan",
        "call_fan/3": "call_fan",
    }
    assert {i: e.parentToolCallId for i, e in ends.items()} == parents
    assert [starts[i].toolName for i in sorted(starts)] == [
        "fanout",
        "fanout",
        "tick",
        "tick",
        "tick",
    ]
    assert [i for i, e in ends.items() if e.isError] == ["call_fan/3"]
    order = [e.toolCallId for e in rec.of(ToolExecutionEnd)]
    assert order.index("call_fan/1/1") < order.index("call_fan/1") < order.index("call_fan")
    # 1.x times each call itself (a field the bridge reads when it is there).
    assert all(e.durationMs is not None and e.durationMs >= 0 for e in ends.values())


MCP_SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_stdio_server.py"
# A codemode script calling two tools of the test's MCP server ("local"), which are
# callable from scripts only (pi's default MCP exposure).
SCRIPT = (
    "const a = await tools.mcp__local__shout({ text: 'hi' });\n"
    "let b = 'none';\n"
    "try { await tools.mcp__local__refuse({}); } catch (e) { b = 'refused'; }\n"
    "return JSON.stringify(a) + ' ' + b;"
)


async def test_a_codemode_script_calling_mcp_tools_reports_them_as_nested_calls(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(NESTING_VERSION)
    server = {"command": sys.executable, "args": [str(MCP_SERVER)]}
    mcp = {"mcpServers": {"local": server}}
    (agent_home.agent_dir / "mcp.json").write_text(json.dumps(mcp), encoding="utf-8")
    fake_llm.add(
        "script",
        Reply(tool_calls=[ToolCall("codemode", {"code": SCRIPT}, id="call_code")]),
        Reply(text="Scripted."),
    )
    spec = spec_for(agent_home, NESTING_VERSION, tmp_path / "ws")
    async with running(spec) as (agent, rec):
        await agent.prompt("script it")
        await rec.wait_for(RunEnded, within=60)
    starts = {e.toolCallId: e for e in rec.of(ToolExecutionStart)}
    ends = {e.toolCallId: e for e in rec.of(ToolExecutionEnd)}
    assert {i: (e.toolName, e.parentToolCallId) for i, e in starts.items()} == {
        "call_code": ("codemode", None),
        "call_code/1": ("mcp__local__shout", "call_code"),
        "call_code/2": ("mcp__local__refuse", "call_code"),
    }
    assert {i: e.isError for i, e in ends.items()} == {
        "call_code/1": False,
        "call_code/2": True,  # an MCP error result (the script still resolves it)
        "call_code": False,
    }
    assert "MCP-HI" in str(ends["call_code/1"].result)

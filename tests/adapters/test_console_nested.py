"""Nested tool calls in the terminal: the real renderer and console adapter
(tests/adapters/test_console.py's `Scene`) print a tool that ran 30 tools once, in
its final form, with the newest calls as indented sub-lines and the rest counted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.rpc.signals import RunEnded, RunStarted
from tests.adapters.test_console import Scene, event

if TYPE_CHECKING:
    from bridge.rpc.agent_event import AgentEvent

pytestmark = pytest.mark.anyio


def nested(kind: str, n: int, **fields: object) -> AgentEvent:
    return event(
        type=f"tool_execution_{kind}",
        toolCallId=f"call_fan/{n}",
        toolName="tick",
        parentToolCallId="call_fan",
        **fields,
    )


async def test_a_tool_that_ran_tools_is_printed_once_with_its_calls_as_sub_lines() -> None:
    scene = Scene(terminal=False)
    await scene.feed(RunStarted(), event(type="agent_start"))
    await scene.feed(
        event(type="tool_execution_start", toolCallId="call_fan", toolName="fanout", args={"n": 30})
    )
    for n in range(1, 31):
        result = {"content": [{"type": "text", "text": f"tick {n}"}]}
        await scene.feed(
            nested("start", n, args={"n": n}),
            nested("end", n, result=result, isError=n == 30, durationMs=n),
            step=0.02,
        )
    done = {"content": [{"type": "text", "text": "FANOUT-DONE"}]}
    await scene.feed(
        event(type="tool_execution_end", toolCallId="call_fan", toolName="fanout", result=done)
    )
    await scene.feed(event(type="agent_end", messages=[]), RunEnded())
    output = scene.shown()
    assert output.count("✅ fanout") == 1
    assert output.count("FANOUT-DONE") == 1
    assert "… 18 earlier (18 ✓)" in output
    assert '↳ ✗ tick  `{"n":30}` · 30 ms' in output
    assert '↳ ✓ tick  `{"n":19}` · 19 ms' in output
    assert "✅ tick" not in output  # no message of their own

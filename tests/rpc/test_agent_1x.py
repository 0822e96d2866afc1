"""What pi 1.x tells that older agents leave the client to guess, with the real agents.

- dispositions: the answer to a prompt says whether a run began ("started") or the
  message was dealt with at once ("handled": an extension command, or an input
  handler that took it), so no `agent_settled` is waited for; steer and follow-up say
  "queued" or "handled";
- `agent_settled.aborted` and `tool_execution_end.durationMs`;
- the stepwise close (cancel dialogs, abort, stdin, SIGTERM) loses no final message
  and ends no agent before its session is written.
Where older agents lack a field the client keeps its old ways: those tests run on
every pinned agent.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.client import AgentClient
from bridge.rpc.content import AssistantMessage
from bridge.rpc.events import (
    AgentSettled,
    AgentStart,
    MessageEnd,
    MessageUpdate,
    QueueUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from bridge.rpc.process import STDIN_CLOSE_WAIT
from bridge.rpc.profile import EARENDIL_1, disposition
from bridge.rpc.signals import RunEnded, RunStarted
from bridge.rpc.ui import NotifyRequest
from tests.conftest import require_agent
from tests.support.agent_session import Recorder, running, spec_for
from tests.support.agents import extension_path
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

NEWEST = "1.5.2"
NOTES = str(EXTENSIONS / "input-notes.ts")


@pytest.fixture
def newest() -> str:
    require_agent(NEWEST)
    return NEWEST


def text_delta(event: MessageUpdate) -> bool:
    return event.assistantMessageEvent.type == "text_delta"


async def test_a_prompt_an_input_handler_takes_ends_its_run_at_the_answer(
    newest: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # No agent loop, no agent_settled: without the disposition the client would wait
    # for one for ever, the conversation busy.
    async with running(spec_for(agent_home, newest, tmp_path / "ws", "-e", NOTES)) as (
        agent,
        rec,
    ):
        answer = await agent.prompt("#note buy milk")
        assert disposition(answer) == "handled"
        assert agent.profile is EARENDIL_1
        assert not agent.state.busy
        await rec.wait_for(RunEnded)
        assert (await rec.wait_for(NotifyRequest)).message == "noted: #note buy milk"
        assert rec.of(AgentStart) == []
        # The next prompt runs as usual.
        answer = await agent.prompt("hello")
        assert disposition(answer) == "started"
        await rec.wait_for(RunEnded, after=rec.events.index(rec.of(RunEnded)[0]) + 1)
    assert fake_llm.requests
    assert all("#note" not in str(r.messages) for r in fake_llm.requests)


async def test_an_extension_command_runs_no_agent_loop_on_every_agent(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    demo = str(extension_path(version, "rpc-demo.ts"))
    async with running(spec_for(agent_home, version, tmp_path / "ws", "-e", demo)) as (
        agent,
        rec,
    ):
        answer = await agent.prompt("/rpc-prefill")
        assert not agent.state.busy
        await rec.wait_for(RunEnded)
        assert len(rec.of(RunStarted)) == 1
        assert rec.of(AgentStart) == []
        assert disposition(answer) == ("handled" if version == NEWEST else None)
    assert fake_llm.requests == []


async def test_steer_and_follow_up_say_queued_or_handled(
    newest: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("slow", Reply(tool_calls=[ToolCall("bash", {"command": "sleep 1; echo slept"})]))
    async with running(spec_for(agent_home, newest, tmp_path / "ws", "-e", NOTES)) as (
        agent,
        rec,
    ):
        await agent.prompt("slow tool please")
        await rec.wait_for(ToolExecutionStart)
        assert disposition(await agent.steer("#note while busy")) == "handled"
        assert disposition(await agent.steer("STEER-BLUE")) == "queued"
        assert disposition(await agent.follow_up("#note for later")) == "handled"
        await rec.wait_for(RunEnded)
    queued = [u.steering + u.followUp for u in rec.of(QueueUpdate)]
    assert ["STEER-BLUE"] in queued
    assert all("#note" not in text for listed in queued for text in listed)
    assert any("STEER-BLUE" in str(r.messages) for r in fake_llm.requests)


async def test_agent_settled_says_whether_the_run_was_stopped(
    newest: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("story", Reply(text=" ".join(f"w{i}" for i in range(200)), delay=0.05))
    fake_llm.add("hello", Reply(text="Hello."))
    async with running(spec_for(agent_home, newest, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("hello")
        first = await rec.wait_for(AgentSettled)
        await agent.prompt("a story")
        await rec.wait_for(MessageUpdate, text_delta)
        await agent.abort()
        await rec.wait_for(RunEnded, after=rec.events.index(first) + 2)
    assert [s.aborted for s in rec.of(AgentSettled)] == [False, True]


async def test_a_tool_end_carries_its_duration_where_the_agent_measures_it(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "nap",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 0.4; echo up"})]),
        Reply(text="Awake."),
    )
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("take a nap")
        end = await rec.wait_for(ToolExecutionEnd)
        await rec.wait_for(RunEnded)
    if version == NEWEST:
        assert end.durationMs is not None
        assert 400 <= end.durationMs < 10_000
    else:
        assert end.durationMs is None


async def test_closing_mid_answer_loses_no_final_message_and_ends_after_the_session_is_written(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # The client's close: dialogs cancelled, the run aborted, then stdin closed; SIGTERM
    # only if the agent has not exited 3 s later. 1.5 waits for pending work on stdin
    # EOF and ignores one SIGTERM while it does (a process manager sends both at once).
    fake_llm.add("story", Reply(text=" ".join(f"w{i}" for i in range(300)), delay=0.05))
    sessions = tmp_path / "sessions"
    spec = spec_for(agent_home, version, tmp_path / "ws", "--session-dir", str(sessions))
    async with anyio.create_task_group() as tg:
        async with AgentClient(spec) as agent:
            rec = Recorder(agent)
            tg.start_soon(rec.run)  # reads on while the client closes, to the last event
            await agent.prompt("a story")
            await rec.wait_for(MessageUpdate, text_delta)
            began = time.monotonic()
        took = time.monotonic() - began
    assert agent.returncode == 0  # it exited on stdin EOF, by itself
    assert took < STDIN_CLOSE_WAIT
    ends = [e.message for e in rec.of(MessageEnd) if isinstance(e.message, AssistantMessage)]
    assert ends
    assert ends[-1].stopReason in ("aborted", "error")
    if version == NEWEST:
        assert [s.aborted for s in rec.of(AgentSettled)] == [True]
    (session_file,) = sessions.glob("*.jsonl")
    entries = [json.loads(line) for line in session_file.read_text().splitlines()]
    messages = [e["message"] for e in entries if e.get("type") == "message"]
    # (0.87.1 and 1.x also write the system prompt as a message.)
    assert [m["role"] for m in messages if m["role"] != "system"] == ["user", "assistant"]
    assert messages[-1]["stopReason"] == ends[-1].stopReason

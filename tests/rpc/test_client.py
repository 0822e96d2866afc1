"""The RPC client against the real pi agents (0.73.1, 0.87.1, 1.5.2) and a scripted LLM.

Each test starts a real agent process in a temporary workspace, points it at the
fake LLM on 127.0.0.1 and checks what a bridge depends on: answers stream,
tools report progress, dialogs block until answered, steer and follow-up land
in the same run, abort is fast even with a dialog open, a killed agent fails
its waiting requests, and a session resumes with its history.
"""

from __future__ import annotations

import base64
import itertools
import os
import signal
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.commands import Bash, GetMessages
from bridge.rpc.content import ImageContent, TextContent, UserMessage
from bridge.rpc.env import agent_environment
from bridge.rpc.errors import AgentExited
from bridge.rpc.events import (
    MessageStart,
    QueueUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from bridge.rpc.process import AgentSpec
from bridge.rpc.profile import EARENDIL, EARENDIL_1, PI
from bridge.rpc.signals import RunEnded, RunStarted
from bridge.rpc.ui import SelectRequest
from tests.support.agent_session import running, spec_for
from tests.support.agents import extension_path
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

# The profile found at start; 1.5.2 shows it is 1.x with its first prompt's answer.
PROFILES = {"0.73.1": PI, "0.87.1": EARENDIL, "1.5.2": EARENDIL}
AFTER_A_RUN = {**PROFILES, "1.5.2": EARENDIL_1}
# A 4x4 PNG (the one the recorded i_image transcript used).
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/"
    "x0F8jngAAAABJRU5ErkJggg=="
)


def tool_text(event: ToolExecutionEnd) -> str:
    result = event.result
    if isinstance(result, str) or result is None:
        return result or ""
    return "".join(getattr(b, "text", "") for b in result.content)


async def test_a_plain_prompt_streams_its_answer_and_ends_the_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("hello", Reply(text="Hello there, friend."))
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        assert agent.profile == PROFILES[version]
        await agent.prompt("hello agent")
        assert agent.state.busy
        await rec.wait_for(RunEnded)
        assert rec.text() == "Hello there, friend."
        assert not agent.state.busy
        assert len(rec.of(RunStarted)) == 1
        assert agent.profile == AFTER_A_RUN[version]


async def test_a_bash_tool_reports_cumulative_progress_and_its_result(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script = "for i in 1 2 3; do echo line$i; sleep 0.3; done"
    fake_llm.add(
        "count",
        Reply(text="Counting.", tool_calls=[ToolCall("bash", {"command": script})]),
        Reply(text="Counted."),
    )
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("count for me")
        start = await rec.wait_for(ToolExecutionStart)
        assert start.toolName == "bash"
        assert start.toolCallId in agent.state.tools or rec.of(ToolExecutionEnd)
        end = await rec.wait_for(ToolExecutionEnd)
        await rec.wait_for(RunEnded)
    assert end.toolCallId == start.toolCallId
    assert not end.isError
    assert "line3" in tool_text(end)
    updates = [
        u for u in rec.of(ToolExecutionUpdate) if u.partialResult and u.partialResult.content
    ]
    outputs = [
        "".join(getattr(b, "text", "") for b in u.partialResult.content)
        for u in updates
        if u.partialResult
    ]
    assert outputs, "no progress was reported while the tool ran"
    # Cumulative: each update holds everything so far.
    assert all(a in b or b.startswith(a.rstrip()) for a, b in itertools.pairwise(outputs))


@pytest.mark.parametrize(("answer", "blocked"), [("Yes", False), ("No", True)])
async def test_the_permission_gate_waits_for_the_answer(
    version: str,
    answer: str,
    blocked: bool,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "build").mkdir(parents=True)
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build && echo removed"})]),
        Reply(text="Finished."),
    )
    gate = str(extension_path(version, "permission-gate.ts"))
    async with running(spec_for(agent_home, version, workspace, "-e", gate)) as (agent, rec):
        await agent.prompt("clean the build")
        dialog = await rec.wait_for(SelectRequest)
        assert dialog.options == ["Yes", "No"]
        assert "rm -rf build" in dialog.title
        assert dialog.id in agent.state.dialogs
        assert (workspace / "build").exists(), "the command ran before the answer"
        await agent.answer_dialog(dialog.id, value=answer)
        end = await rec.wait_for(ToolExecutionEnd)
        await rec.wait_for(RunEnded)
    assert end.isError is blocked
    assert (workspace / "build").exists() is blocked
    assert ("Blocked by user" in tool_text(end)) is blocked


async def test_a_steer_while_a_tool_runs_lands_in_the_same_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "slowtool",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 1.5; echo slept"})]),
        Reply(text="Tool done."),
    )
    fake_llm.add("STEER", Reply(text="Steered."))
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("run the slowtool")
        await rec.wait_for(ToolExecutionStart)
        await agent.steer("STEER: say hi instead")
        queued = await rec.wait_for(QueueUpdate, lambda q: bool(q.steering))
        assert queued.steering == ["STEER: say hi instead"]
        await rec.wait_for(RunEnded)
    assert len(rec.of(RunStarted)) == 1
    assert len(rec.of(RunEnded)) == 1
    assert any("STEER" in r.last_user_text for r in fake_llm.requests)
    assert "slept" in tool_text(rec.of(ToolExecutionEnd)[0]), "the running tool was cut"


async def test_a_follow_up_is_answered_after_the_first_answer_in_the_same_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("slowtext", Reply(text=" ".join(f"w{i}" for i in range(20)), delay=0.05))
    fake_llm.add("FOLLOW", Reply(text="Followed up."))
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("slowtext please")
        await agent.follow_up("FOLLOW: and then this")
        await rec.wait_for(RunEnded)
    assert rec.text().endswith("Followed up.")
    assert [r.last_user_text for r in fake_llm.requests][-1].startswith("FOLLOW")
    assert len(rec.of(RunEnded)) == 1


async def test_abort_during_a_tool_kills_the_command_and_ends_the_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("forever", Reply(tool_calls=[ToolCall("bash", {"command": "sleep 60"})]))
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("sleep forever")
        await rec.wait_for(ToolExecutionStart)
        started = time.monotonic()
        await agent.abort()
        end = await rec.wait_for(ToolExecutionEnd, within=5)
        await rec.wait_for(RunEnded, within=5)
        elapsed = time.monotonic() - started
    assert end.isError
    assert elapsed < 5


async def test_abort_with_a_dialog_pending_ends_the_run_in_under_a_second(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("wipe", Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /tmp/none"})]))
    gate = str(extension_path(version, "permission-gate.ts"))
    async with running(spec_for(agent_home, version, tmp_path / "ws", "-e", gate)) as (agent, rec):
        await agent.prompt("wipe it")
        await rec.wait_for(SelectRequest)
        started = time.monotonic()
        await agent.abort()
        await rec.wait_for(RunEnded, within=5)
        elapsed = time.monotonic() - started
        assert not agent.state.dialogs
    assert elapsed < 1.0, f"abort took {elapsed:.2f} s"


async def test_a_killed_agent_fails_the_waiting_request_with_its_exit_code(
    version: str, agent_home: AgentHome, tmp_path: Path
) -> None:
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, _rec):
        failure: AgentExited | None = None

        async def wait_for_bash() -> None:
            nonlocal failure
            try:
                await agent.request(Bash(command="sleep 30"), limit=20)
            except AgentExited as exc:
                failure = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_for_bash)
            await anyio.sleep(0.5)
            os.kill(agent.pid, signal.SIGKILL)
        assert failure is not None
        assert failure.returncode == -signal.SIGKILL
        assert not agent.alive


async def test_a_session_resumes_with_its_history_after_a_kill(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    fake_llm.add("KIWI", Reply(text="I will remember KIWI."))
    spec = spec_for(agent_home, version, tmp_path / "ws", "--session-dir", str(sessions))
    async with running(spec) as (agent, rec):
        await agent.prompt("remember the word KIWI")
        await rec.wait_for(RunEnded)
        session_file = str((await agent.get_state())["sessionFile"])
        os.kill(agent.pid, signal.SIGKILL)
        await agent.wait()
    resumed = spec_for(agent_home, version, tmp_path / "ws", "--session", session_file)
    async with running(resumed) as (agent, _rec):
        assert (await agent.get_state())["sessionFile"] == session_file
        messages = (await agent.request(GetMessages())).data["messages"]
    texts = [str(m.get("content")) for m in messages]
    assert any("remember the word KIWI" in t for t in texts)
    assert any("I will remember KIWI." in t for t in texts)


async def test_line_and_paragraph_separators_round_trip_unchanged(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    tricky = "A\u2028B\u2029C 🦊"
    fake_llm.add("unicode", Reply(text=f"Echo {tricky} end"))
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt(f"unicode {tricky}")
        await rec.wait_for(RunEnded)
    assert rec.text() == f"Echo {tricky} end"
    assert tricky in fake_llm.requests[-1].last_user_text
    users = [m.message for m in rec.of(MessageStart) if isinstance(m.message, UserMessage)]
    content = users[0].content
    sent = (
        content
        if isinstance(content, str)
        else "".join(b.text for b in content if isinstance(b, TextContent))
    )
    assert sent == f"unicode {tricky}"


async def test_an_image_prompt_reaches_the_model(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("picture", Reply(text="A tiny image."))
    image = ImageContent(data=PNG, mimeType="image/png")
    assert base64.b64decode(PNG).startswith(b"\x89PNG")
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("what is in this picture?", [image])
        await rec.wait_for(RunEnded)
    assert fake_llm.requests[-1].n_images == 1
    assert rec.text() == "A tiny image."


async def test_the_bridge_secrets_never_reach_the_agent(
    version: str, agent_home: AgentHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "tg-secret-123")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "slack-secret-456")
    monkeypatch.setenv("PROVIDER_KEY_FOR_AGENT", "passed-on")
    env = agent_environment({**os.environ, **agent_home.env()}, ["PROVIDER_KEY_FOR_AGENT"])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec = AgentSpec(argv=agent_home.argv(version), cwd=workspace, env=env)
    async with running(spec) as (agent, _rec):
        output = (await agent.request(Bash(command="env"))).data["output"]
    assert "passed-on" in output
    assert "tg-secret-123" not in output
    assert "slack-secret-456" not in output


async def test_closing_during_a_run_aborts_it_and_leaves_no_process_behind(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("forever", Reply(tool_calls=[ToolCall("bash", {"command": "sleep 60"})]))
    async with running(spec_for(agent_home, version, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("sleep forever")
        await rec.wait_for(ToolExecutionStart)
        group = agent.pid
        started = time.monotonic()
    assert time.monotonic() - started < 10
    assert agent.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # nothing of the agent's process group is left

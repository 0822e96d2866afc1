"""Smoke tests: each installed real agent talks to the fake LLM over raw JSON lines.

No bridge code here on purpose: these tests check the test rig itself (install,
wrappers, agent home, fake LLM) so that a failure elsewhere is not a rig problem.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import require_agent
from tests.support.agents import AGENT_VERSIONS, LEGACY_VERSION
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSIONS = (*AGENT_VERSIONS, LEGACY_VERSION)
WAIT = 30.0  # generous: several agents may start at once on a small CI machine

Record = dict[str, Any]


class RawAgent:
    """An agent process; stdout split into records on b"\\n" only."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.records: list[Record] = []
        self.stderr = bytearray()
        self._changed = asyncio.Condition()
        self._tasks = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        while chunk := await self.process.stdout.read(1 << 16):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    self.records.append(json.loads(line))
            async with self._changed:
                self._changed.notify_all()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(1 << 16):
            self.stderr += chunk

    async def send(self, command: Record) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command, ensure_ascii=True).encode() + b"\n")
        await self.process.stdin.drain()

    async def wait_for(self, where: Callable[[Record], bool], within: float = WAIT) -> Record:
        """The first record so far (or to come) that satisfies `where`."""

        def found() -> Record | None:
            return next((r for r in self.records if where(r)), None)

        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(lambda: found() is not None)
        except TimeoutError:
            kinds = [r.get("type") for r in self.records]
            stderr = self.stderr.decode(errors="replace")[-2000:]
            pytest.fail(f"no matching record within {within}s; got {kinds}; stderr: {stderr}")
        record = found()
        assert record is not None
        return record

    def of_type(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.get("type") == kind]

    async def stop(self) -> None:
        """Close stdin and wait; then SIGTERM, then SIGKILL the whole process group."""
        process = self.process
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), timeout=5)
                break
            except TimeoutError:
                continue
        # Whatever the agent left in its group (a bash tool child, say) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def raw_agent(home: AgentHome, version: str, workspace: Path) -> AsyncIterator[RawAgent]:
    require_agent(version)
    await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        *home.argv(version, "--no-session"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=workspace,
        env=home.env(),
        start_new_session=True,
    )
    agent = RawAgent(process)
    try:
        yield agent
    finally:
        await agent.stop()


def text_deltas(agent: RawAgent) -> str:
    return "".join(
        r["assistantMessageEvent"].get("delta", "")
        for r in agent.of_type("message_update")
        if r.get("assistantMessageEvent", {}).get("type") == "text_delta"
    )


def is_type(kind: str) -> Callable[[Record], bool]:
    return lambda record: record.get("type") == kind


@pytest.mark.parametrize("version", VERSIONS)
async def test_text_answer_streams_to_agent_end(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("hello fake", Reply(text="Hello from the fake LLM, friend."))
    async with raw_agent(agent_home, version, tmp_path / "ws") as agent:
        await agent.send({"type": "prompt", "id": "p1", "message": "hello fake"})
        await agent.wait_for(is_type("agent_end"))

    assert text_deltas(agent) == "Hello from the fake LLM, friend."
    assert len(agent.of_type("agent_end")) == 1
    assert [(r.rule, r.step, r.last_user_text) for r in fake_llm.requests] == [
        ("hello fake", 0, "hello fake")
    ]
    assert fake_llm.requests[0].body["stream"] is True


@pytest.mark.parametrize("version", VERSIONS)
async def test_bash_tool_call_runs(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "say hi",
        Reply(text="Running it.", tool_calls=[ToolCall("bash", {"command": "echo hi"})]),
        Reply(text="It said hi."),
    )
    async with raw_agent(agent_home, version, tmp_path / "ws") as agent:
        await agent.send({"type": "prompt", "id": "p1", "message": "say hi with bash"})
        end = await agent.wait_for(is_type("tool_execution_end"))
        await agent.wait_for(is_type("agent_end"))

    assert end["toolName"] == "bash"
    assert end["isError"] is False
    texts = [c.get("text", "") for c in end["result"]["content"] if c.get("type") == "text"]
    assert "hi" in "".join(texts)
    start = agent.of_type("tool_execution_start")[0]
    assert start["toolCallId"] == end["toolCallId"]
    assert text_deltas(agent) == "Running it.It said hi."
    assert [(r.step, r.roles[-1]) for r in fake_llm.requests] == [(0, "user"), (1, "tool")]
    tool_message = fake_llm.requests[1].messages[-1]
    assert tool_message["tool_call_id"] == end["toolCallId"]
    assert "hi" in json.dumps(tool_message["content"])

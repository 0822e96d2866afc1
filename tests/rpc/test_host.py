"""Agent hosts (bridge/rpc/agenthost, bridge/rpc/hostlink.py): what a host keeps, and a
real agent (0.87.1) living on under its host while its client goes away and comes back.

The buffer is pure and tested with plain calls. The rest starts real hosts around the
real agent and the fake LLM, detaches mid-tool, reattaches after the last record
applied, and checks what arrives: everything after it, once, in order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.agenthost.buffer import Buffer, kind
from bridge.rpc.agenthost.lines import DROPPED, Lines
from bridge.rpc.client import AgentClient
from bridge.rpc.errors import AgentExited
from bridge.rpc.events import AgentEnd, ToolExecutionEnd, ToolExecutionStart
from bridge.rpc.hostlink import HostGone, HostLink, HostPlan, process_start
from bridge.rpc.signals import RunEnded
from bridge.rpc.ui import SelectRequest
from tests.conftest import require_agent
from tests.support.agent_session import Recorder, spec_for
from tests.support.agents import extension_path
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bridge.rpc.process import AgentSpec
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

VERSION = "0.87.1"
WAIT = 30.0


def update(n: int, size: int = 10) -> bytes:
    return b'{"type":"message_update","n":%d,"pad":"%s"}' % (n, b"x" * size)


def record(kind_name: str, n: int, size: int = 10) -> bytes:
    return b'{"type":"%s","n":%d,"pad":"%s"}' % (kind_name.encode(), n, b"x" * size)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (b'{"type":"message_update","x":1}', b"message_update"),
        (b'{ "type" : "agent_end"}', b"agent_end"),
        (b'{"id":"1","type":"response"}', b""),  # type not first: kept, never dropped
        (b"not json", b""),
    ],
)
def test_a_records_kind_is_read_from_its_start(line: bytes, found: bytes) -> None:
    assert kind(line) == found


def test_the_buffer_spills_past_its_memory_cap_and_reads_back_in_order(tmp_path: Path) -> None:
    buffer = Buffer(str(tmp_path / "spill"), memory_cap=1000, total_cap=1 << 20)
    lines = [record("tool_execution_start", n, 90) for n in range(1, 51)]
    for n, line in enumerate(lines, 1):
        buffer.add(n, line)
    assert buffer.memory <= 1000
    assert (tmp_path / "spill").stat().st_size > 0
    assert buffer.after(0) == list(enumerate(lines, 1))
    assert buffer.after(45) == list(enumerate(lines, 1))[45:]
    buffer.ack(50)
    assert buffer.after(0) == []
    assert (tmp_path / "spill").stat().st_size == 0  # nothing spilled is kept: emptied
    buffer.close()
    assert not (tmp_path / "spill").exists()


def test_past_the_total_cap_updates_go_first_and_nothing_that_starts_or_ends(
    tmp_path: Path,
) -> None:
    buffer = Buffer(str(tmp_path / "spill"), memory_cap=500, total_cap=3000)
    kinds = ["agent_start", "message_update", "tool_execution_update", "message_end"] * 20
    for n, name in enumerate(kinds, 1):
        buffer.add(n, record(name, n, 60))
    kept = [kind(line).decode() for _, line in buffer.after(0)]
    assert buffer.total <= 3000 or "message_update" not in kept
    assert kept.count("agent_start") == 20
    assert kept.count("message_end") == 20
    # Updates of messages are dropped before those of tools.
    assert kept.count("message_update") == 0 or kept.count("tool_execution_update") == 20
    assert buffer.dropped > 0
    seqs = [seq for seq, _ in buffer.after(0)]
    assert seqs == sorted(seqs)
    buffer.close()


def test_the_spill_file_is_rewritten_before_dropped_records_dominate_it(tmp_path: Path) -> None:
    buffer = Buffer(str(tmp_path / "spill"), memory_cap=200, total_cap=4000)
    for n in range(1, 400):
        buffer.add(n, update(n, 40) if n % 4 else record("message_end", n, 40))
    kept = sum(len(line) for _, line in buffer.after(0))
    # Dropped records leave holes in the file; it is rewritten before they dominate.
    assert (tmp_path / "spill").stat().st_size <= 2 * max(kept, 200) + 4000
    assert [kind(line) for _, line in buffer.after(0)].count(b"message_end") == 99
    buffer.close()


# --- a real agent under a host ---------------------------------------------------------


def plan(tmp_path: Path, **more: float) -> HostPlan:
    return HostPlan(socket=tmp_path / "hosts" / "a.sock", **more)


@pytest.fixture
def spec(agent_home: AgentHome, tmp_path: Path) -> Iterator[AgentSpec]:
    require_agent(VERSION)
    yield spec_for(agent_home, VERSION, tmp_path / "ws")
    # A failed test may leave its host running: end those this test started (their
    # command line names its socket), by their pid; SIGTERM ends the agent in order.
    for pid in hosts_of(tmp_path / "hosts"):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def hosts_of(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"--socket" in argv and str(folder).encode() in argv[argv.index(b"--socket") + 1]:
                found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    return process_start(pid) is None


async def wait_gone(pid: int, within: float = WAIT) -> None:
    with anyio.fail_after(within):
        while not gone(pid):  # noqa: ASYNC110 (a process's end sets no event of ours)
            await anyio.sleep(0.1)


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_run_goes_on_while_the_client_is_away_and_the_rest_arrives_once(
    spec: AgentSpec, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        "slow job",
        Reply(tool_calls=[ToolCall("bash", {"command": "echo early; sleep 3; echo late"})]),
        Reply(text="Job finished."),
    )
    first = AgentClient(spec, host=plan(tmp_path))
    async with first:
        async with anyio.create_task_group() as tg:
            recorder = Recorder(first)
            tg.start_soon(recorder.run)
            await first.prompt("run the slow job")
            await recorder.wait_for(ToolExecutionStart)
            tg.cancel_scope.cancel()
        link = first.link
        assert isinstance(link, HostLink)
        address, seen, profile = link.address, link.last_seq, first.profile
        first.detach()
    assert not gone(address.pid), "the host went with its client"
    await anyio.sleep(4)  # the tool ends and the answer is written while nobody listens
    second = AgentClient(spec, profile=profile, reattach=(address, seen))
    async with second, anyio.create_task_group() as tg:
        again = Recorder(second)
        tg.start_soon(again.run)
        end = await again.wait_for(ToolExecutionEnd)
        await again.wait_for(RunEnded)
        link = second.link
        assert isinstance(link, HostLink)
        assert link.last_seq > seen
        tg.cancel_scope.cancel()
    assert not again.of(ToolExecutionStart), "a record before the cursor came twice"
    assert "late" in str(end.result)
    assert len(again.of(AgentEnd)) == 1
    await wait_gone(address.pid)  # closed on purpose: the host ends with its agent
    assert not await anyio.Path(address.socket).exists()


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_dialog_opened_while_away_is_there_to_answer_after_reattach(
    spec: AgentSpec, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    gate = str(extension_path(VERSION, "permission-gate.ts"))
    spec = spec_for_gate(spec, gate)
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 2; rm -rf build && echo removed"})]),
        Reply(text="Cleaned."),
    )
    first = AgentClient(spec, host=plan(tmp_path))
    async with first:
        await first.prompt("clean the build")
        link = first.link
        assert isinstance(link, HostLink)
        address, profile = link.address, first.profile
        first.detach()
    second = AgentClient(spec, profile=profile, reattach=(address, 0))
    async with second, anyio.create_task_group() as tg:
        recorder = Recorder(second)
        tg.start_soon(recorder.run)
        dialog = await recorder.wait_for(SelectRequest)
        assert "rm -rf build" in dialog.title
        await second.answer_dialog(dialog.id, value="Yes")
        end = await recorder.wait_for(ToolExecutionEnd)
        await recorder.wait_for(RunEnded)
        tg.cancel_scope.cancel()
    assert "removed" in str(end.result)


def spec_for_gate(spec: AgentSpec, gate: str) -> AgentSpec:
    return replace(spec, argv=[*spec.argv, "-e", gate])


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_host_left_alone_finishes_the_run_then_ends_and_leaves_nothing(
    spec: AgentSpec, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    marker = tmp_path / "ws" / "finished"
    fake_llm.add(
        "long job",
        Reply(tool_calls=[ToolCall("bash", {"command": f"sleep 3; touch {marker}"})]),
        Reply(text="Done."),
    )
    first = AgentClient(spec, host=plan(tmp_path, detach_timeout=1))
    async with first:
        await first.prompt("the long job")
        link = first.link
        assert isinstance(link, HostLink)
        address, keeper = link.address, link.pid
        first.detach()
    started = time.monotonic()
    await wait_gone(address.pid)
    assert marker.exists(), "the run was cut instead of finished"
    assert time.monotonic() - started < WAIT
    await wait_gone(keeper)
    assert not await anyio.Path(address.socket).exists()
    with pytest.raises(HostGone):
        async with AgentClient(spec, reattach=(address, 0)):
            pass


async def ask_until_it_fails(agent: AgentClient) -> None:
    while True:
        await agent.get_state()
        await anyio.sleep(0.1)


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_hosted_agent_that_dies_fails_requests_as_a_child_would(
    spec: AgentSpec, tmp_path: Path
) -> None:
    agent = AgentClient(spec, host=plan(tmp_path))
    async with agent:
        link = agent.link
        assert isinstance(link, HostLink)
        address = link.address
        assert (os.stat(address.socket).st_mode & 0o777) == 0o600
        os.kill(link.pid, signal.SIGKILL)  # the keeper, and with it the agent
        with anyio.fail_after(WAIT), pytest.raises(AgentExited):
            await ask_until_it_fails(agent)
    await wait_gone(address.pid)


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_sigterm_ends_a_detached_host_and_its_agent_at_once(
    spec: AgentSpec, tmp_path: Path
) -> None:
    first = AgentClient(spec, host=plan(tmp_path))  # alone for 600 s unless told
    async with first:
        link = first.link
        assert isinstance(link, HostLink)
        address, keeper = link.address, link.pid
        first.detach()
    os.kill(address.pid, signal.SIGTERM)  # what stopping every agent on purpose does
    await wait_gone(address.pid, within=15)
    assert gone(keeper)
    assert not await anyio.Path(address.socket).exists()


@pytest.mark.parametrize(
    ("chunks", "records"),
    [
        ([b'{"a":1}\n{"b":2}\n'], [b'{"a":1}', b'{"b":2}']),
        ([b'{"a":', b"1}\r\n", b"\n\n"], [b'{"a":1}']),  # split, CRLF, blank lines
        ([b"x" * 40, b"y\n", b"ok\n"], [b"dropped", b"ok"]),  # over the cap: skipped to LF
        (["a\u2028b\n".encode()], ["a\u2028b".encode()]),  # U+2028 is content
    ],
)
def test_the_host_splits_records_on_lf_only(chunks: list[bytes], records: list[bytes]) -> None:
    lines = Lines(max_record=32)
    found = [r for chunk in chunks for r in lines.feed(chunk)]
    assert [b"dropped" if r == DROPPED else r for r in found] == records

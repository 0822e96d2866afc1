"""The client keeps going through everything a broken agent can write.

Driven against `tests/support/standin_agent.py`, a real process that writes malformed,
oversized, unknown and split records on purpose; the real agents never do, so
this is the only way to see these paths run end to end.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.client import AgentClient
from bridge.rpc.commands import ClearQueue
from bridge.rpc.decode import MalformedRecord
from bridge.rpc.errors import AgentExited, AgentStartError, CommandFailed
from bridge.rpc.events import MessageUpdate, UnknownEvent
from bridge.rpc.framing import OversizedRecord
from bridge.rpc.process import AgentSpec
from bridge.rpc.profile import PI
from bridge.rpc.signals import AgentGone, OrphanResponse, RunEnded
from tests.support.agent_session import Recorder
from tests.support.paths import SUPPORT

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

STANDIN = SUPPORT / "standin_agent.py"
CAP = 64 * 1024


def standin_spec(tmp_path: Path) -> AgentSpec:
    return AgentSpec(argv=[sys.executable, str(STANDIN)], cwd=tmp_path, env={})


async def test_bad_records_become_values_and_the_run_still_ends(tmp_path: Path) -> None:
    async with AgentClient(standin_spec(tmp_path), max_record=CAP) as agent:
        assert agent.profile == PI
        recorder = Recorder(agent)
        async with anyio.create_task_group() as tg:
            tg.start_soon(recorder.run)
            await agent.prompt("go")
            await recorder.wait_for(RunEnded, within=10)
            tg.cancel_scope.cancel()
    problems = recorder.of(MalformedRecord)
    reasons = " | ".join(p.reason for p in problems)
    assert "not JSON" in reasons
    assert "not a JSON object" in reasons
    assert "tool_execution_start" in reasons
    assert len(problems) == 3
    oversized = recorder.of(OversizedRecord)
    assert len(oversized) == 1
    assert oversized[0].size > CAP
    unknown = recorder.of(UnknownEvent)
    assert [u.type for u in unknown] == ["brand_new_event"]
    assert unknown[0].model_extra == {"detail": {"kept": True}}
    assert recorder.text() == "A\u2028B"
    assert len(recorder.of(MessageUpdate)) == 1


async def test_an_id_less_error_response_fails_the_request_it_belongs_to(tmp_path: Path) -> None:
    async with AgentClient(standin_spec(tmp_path)) as agent:
        with pytest.raises(CommandFailed, match="Unknown command: clear_queue"):
            await agent.request(ClearQueue())
        # The probe's parse error was swallowed at start; nothing else is orphaned.
        assert agent.state.phase.value == "idle"


async def test_the_event_stream_ends_with_agent_gone_when_the_agent_exits(
    tmp_path: Path,
) -> None:
    async with AgentClient(standin_spec(tmp_path)) as agent:
        await agent.aclose()
        events = [e async for e in agent.events]
    assert isinstance(events[-1], AgentGone)
    assert not any(isinstance(e, OrphanResponse) for e in events)


async def test_a_missing_agent_binary_is_a_clear_start_error(tmp_path: Path) -> None:
    spec = AgentSpec(argv=[str(tmp_path / "no-such-pi"), "--mode", "rpc"], cwd=tmp_path)
    with pytest.raises(AgentStartError, match="no-such-pi"):
        async with AgentClient(spec):
            pass


async def test_an_agent_that_dies_at_start_reports_its_exit_code_and_stderr(
    tmp_path: Path,
) -> None:
    crash = "import sys; sys.stderr.write('boom: no config\\n'); sys.exit(3)"
    spec = AgentSpec(argv=[sys.executable, "-c", crash], cwd=tmp_path)
    with pytest.raises(AgentExited) as info:
        async with AgentClient(spec):
            pass
    assert info.value.returncode == 3
    assert "boom: no config" in info.value.stderr_tail
    assert "boom: no config" in str(info.value)

"""A steer that reaches pi 0.73.1 just after its run ended is not left in its queue.

The bridge steers while it believes a run is on; the agent's run may have taken its
last look at the queue already (a message right behind a short run's prompt, as a
frontend hands in what waited during a Redis restart). 0.73.1 has no `clear_queue`
to hand such a steer back, and a `steer` sent to it idle waits for a next prompt
that may never come. The client sends 0.73.1 a prompt marked "steer" instead, which
the agent queues while a run is on and otherwise runs: the model gets it, once.
Here the steer comes once the run has ended for sure, the worst of that race.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.rpc.events import QueueUpdate
from bridge.rpc.profile import PI
from bridge.rpc.signals import RunEnded, RunStarted
from tests.conftest import require_agent
from tests.support.agent_session import running, spec_for
from tests.support.fake_llm import Reply

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.73.1"  # the `pi` profile: no clear_queue


async def test_a_steer_after_the_run_ended_reaches_the_model_once(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(VERSION)
    fake_llm.add("hello", Reply(text="Hello."))
    fake_llm.add("LATE", Reply(text="Late one answered."))
    async with running(spec_for(agent_home, VERSION, tmp_path / "ws")) as (agent, rec):
        assert agent.profile == PI
        await agent.prompt("hello agent")
        await rec.wait_for(RunEnded)
        ended = len(rec.events)
        await agent.steer("LATE: and this")
        await rec.wait_for(RunEnded, after=ended, within=20)
    assert rec.text().endswith("Late one answered.")
    assert len(rec.of(RunStarted)) == 2
    assert not [q for q in rec.of(QueueUpdate) if q.steering]  # never left in the queue
    seen = [sum("LATE" in str(m.get("content")) for m in r.messages) for r in fake_llm.requests]
    assert seen == [0, 1]

"""The same client drives the legacy protocol (pi 0.13.2): detected, not configured.

The legacy agent answers no command, takes images as `attachments`, and runs a
second prompt concurrently with the first, so the client queues for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.rpc.commands import GetState
from bridge.rpc.content import ImageContent
from bridge.rpc.errors import Unsupported
from bridge.rpc.events import QueueUpdate
from bridge.rpc.profile import LEGACY
from bridge.rpc.signals import RunEnded, RunStarted
from tests.rpc.test_client import PNG
from tests.support.agent_session import running, spec_for
from tests.support.agents import LEGACY_VERSION
from tests.support.fake_llm import Reply

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


@pytest.fixture(autouse=True)
def _legacy_installed() -> None:
    from tests.conftest import require_agent

    require_agent(LEGACY_VERSION)


async def test_the_legacy_agent_is_detected_and_takes_an_image_attachment(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("picture", Reply(text="A tiny image."))
    async with running(spec_for(agent_home, LEGACY_VERSION, tmp_path / "ws")) as (agent, rec):
        assert agent.profile == LEGACY
        with pytest.raises(Unsupported):
            await agent.request(GetState())
        await agent.prompt(
            "what is in this picture?", [ImageContent(data=PNG, mimeType="image/png")]
        )
        await rec.wait_for(RunEnded)
    assert rec.text() == "A tiny image."
    assert fake_llm.requests[-1].n_images == 1


async def test_a_message_sent_while_the_legacy_agent_works_waits_for_the_run_to_end(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("slowtext", Reply(text=" ".join(f"w{i}" for i in range(15)), delay=0.05))
    fake_llm.add("SECOND", Reply(text="Second answer."))
    async with running(spec_for(agent_home, LEGACY_VERSION, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("slowtext please")
        await agent.steer("SECOND message")
        queued = await rec.wait_for(QueueUpdate, lambda q: bool(q.steering))
        assert queued.steering == ["SECOND message"]
        await rec.wait_for(RunEnded)
        await rec.wait_for(RunEnded, after=rec.events.index(rec.of(RunEnded)[0]) + 1)
    assert len(rec.of(RunStarted)) == 2
    first, second = fake_llm.requests[-2:]
    assert first.last_user_text == "slowtext please"
    assert second.last_user_text == "SECOND message"
    # Sent after the first answer, not interleaved with it.
    assert "assistant" in [m["role"] for m in second.body["messages"]]


async def test_abort_stops_a_legacy_run(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("slowtext", Reply(text=" ".join(f"w{i}" for i in range(200)), delay=0.05))
    async with running(spec_for(agent_home, LEGACY_VERSION, tmp_path / "ws")) as (agent, rec):
        await agent.prompt("slowtext please")
        await rec.wait_for(RunStarted)
        await agent.abort()
        await rec.wait_for(RunEnded, within=5)
    assert "w199" not in rec.text()

"""A run survives a bridge restart on Slack: the real slack-bolt against the fake Slack,
the real agent under its host (bridge/conversation/hosts.py). The bridge stops mid-tool (drained:
it detaches), a new one on the same data dir and the same Slack takes the agent back,
and the thread goes on: the tool's later output, the answer once, the same status.

Both ways Slack shows an answer are covered: posted and edited, and streamed (Slack's
chat streams, where a replayed answer must not start a second stream).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.conversation.hosts import stop_all
from bridge.store import open_store
from tests.adapters.slack.test_e2e import find, slack_bridge, until_shown
from tests.conftest import require_agent
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import FakeSlack

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"
ANSWER = "The slow job is finished."
TOOL = "printf 'first-%s\\n' half; sleep 6; printf 'second-%s\\n' half"


@contextlib.asynccontextmanager
async def hosts_stopped(tmp_path: Path) -> AsyncIterator[None]:
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            store = await open_store("sqlite", tmp_path / "data")
            try:
                await stop_all(store)  # what the test's bridges left running
            finally:
                await store.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["edited", "streamed"])
async def test_a_thread_goes_on_across_a_restart_with_its_answer_shown_once(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path, stream: bool
) -> None:
    require_agent(VERSION)
    fake_llm.add(
        "slow job",
        Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]),
        Reply(text=ANSWER),
    )
    async with hosts_stopped(tmp_path), FakeSlack() as slack:
        async with slack_bridge(
            agent_home, VERSION, tmp_path, stream=stream, on=slack, on_stop="detach"
        ):
            root = (await slack.mention("run the slow job"))["payload"]["event"]["ts"]
            status = await until_shown(slack, root, "working")
            await until_shown(slack, root, "bash")
        assert find(slack, root, ANSWER) is None
        async with slack_bridge(
            agent_home, VERSION, tmp_path, stream=stream, on=slack, on_stop="detach"
        ):
            await until_shown(slack, root, ANSWER)
            await slack.wait_until(lambda: "done" in status.visible, 30)
        answers = [m for m in slack.messages.values() if not m.deleted and ANSWER in m.visible]
        assert len(answers) == 1
        done = [m for m in slack.messages.values() if not m.deleted and "✅ done" in m.visible]
        assert done == [status]
        # A stream the first bridge left open is stopped, not left "in progress".
        assert not [m for m in slack.messages.values() if m.streaming]

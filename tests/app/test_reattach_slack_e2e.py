"""Running tasks survive a bridge restart on Slack: `pi-bridge run` as a process in
Socket Mode against the fake Slack, the real agent under its host (bridge/conversation/hosts.py,
bridge/rpc/agenthost).

A mention starts a thread whose run has a 15-second tool; the bridge is stopped
mid-tool (SIGTERM: it detaches; SIGKILL: it just dies) and started again 3 s later
on the same data dir. The agent outlives the first bridge; the second one takes it
back, and the thread goes on: the tool's later output and the answer show (the
answer once), the status message that said "working" says "done" (no second one),
nothing says "interrupted", and the prompt is not run again. Both ways Slack shows
an answer: streamed (the default) and posted and edited (`[slack] streaming = "edit"`).
Not asserted: the first bridge's stream (its task card) is not taken back; the tool
and the answer go below it as messages.
"""

from __future__ import annotations

import shlex
import signal
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.conftest import require_agent
from tests.support.cli import (
    WAIT,
    agent_processes,
    bridge_process,
    cli_env,
    kill_agents,
    stop,
    write_config,
)
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, FakeSlack

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import Posted

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"
PROMPT = "run the long job"
ANSWER = "The long job is finished."
# Its outputs are not in its command, so seeing them means the tool got that far.
TOOL = "printf 'first-%s\\n' half; sleep 15; printf 'second-%s\\n' half"
CONFIG = '[agents]\non_stop = "detach"\n'


def env_for(tmp_path: Path, home: AgentHome, slack: FakeSlack, streaming: str) -> dict[str, str]:
    config = write_config(tmp_path, CONFIG + f'[slack]\nstreaming = "{streaming}"\n')
    return cli_env(
        tmp_path,
        home,
        PI_BRIDGE_CONFIG=config,
        PI_BRIDGE_ON_STOP="detach",
        PI_BRIDGE_APPROVALS="off",
        PI_BRIDGE_AGENT_COMMAND=shlex.join(home.argv(VERSION)),
        SLACK_BOT_TOKEN=slack.bot_token,
        SLACK_APP_TOKEN=slack.app_token,
        SLACK_API_BASE_URL=slack.base_url,
        SLACK_ALLOWED_USERS=ALICE,
    )


def shown(slack: FakeSlack, text: str) -> list[Posted]:
    return [m for m in slack.messages.values() if not m.deleted and text in m.visible]


def in_thread(slack: FakeSlack, root: str, text: str) -> Posted | None:
    return next((m for m in reversed(shown(slack, text)) if m.thread_ts == root), None)


async def until_shown(slack: FakeSlack, root: str, text: str) -> Posted:
    await slack.wait_until(lambda: in_thread(slack, root, text) is not None, WAIT)
    found = in_thread(slack, root, text)
    assert found is not None
    return found


def tool_output(slack: FakeSlack, root: str) -> str:
    """What the thread shows of its tools' output: in messages, and in streams' task cards."""
    thread = [m for m in slack.messages.values() if not m.deleted and m.thread_ts == root]
    cards = [t.output for m in thread if m.stream is not None for t in m.stream.tasks.values()]
    return "\n".join([m.visible for m in thread] + cards)


async def halt(process: Process, how: signal.Signals) -> None:
    if how == signal.SIGTERM:
        assert await stop(process) == 0
    else:
        process.kill()
        await process.wait()


@pytest.mark.parametrize("streaming", ["stream", "edit"])
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_thread_goes_on_across_a_restart_in_the_same_status_message(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, how: signal.Signals, streaming: str
) -> None:
    require_agent(VERSION)
    fake_llm.add(
        "long job",
        Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]),
        Reply(text=ANSWER),
    )
    data = tmp_path / "data"
    async with FakeSlack() as slack:
        env = env_for(tmp_path, agent_home, slack, streaming)
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                await slack.connected()
                root = (await slack.mention(PROMPT))["payload"]["event"]["ts"]
                status = await until_shown(slack, root, "working")
                await until_shown(slack, root, "bash")
                await halt(process, how)
            assert agent_processes(data), "the agent ended with the bridge"
            assert not shown(slack, ANSWER)
            assert "second-half" not in tool_output(slack, root)
            await anyio.sleep(3)
            async with bridge_process(tmp_path, env, "second.log") as process:
                await until_shown(slack, root, ANSWER)
                await slack.wait_until(lambda: "done" in status.visible, WAIT)
                await slack.wait_until(lambda: "second-half" in tool_output(slack, root), WAIT)
                assert await stop(process) == 0
        finally:
            kill_agents(data)
    assert len(shown(slack, ANSWER)) == 1
    assert shown(slack, "✅ done") == [status]
    assert not shown(slack, "interrupted")
    assert len([r for r in fake_llm.requests if PROMPT in r.last_user_text]) == 2

"""Pings in a scale-out: a frontend and a worker as `pi-bridge run` processes on a real
redis-server, Discord faked, the real agent against the fake LLM, `[notify]` read from
the configuration file. The ping (whom a message notifies) travels from the worker's
renderer through its `RemoteAdapter` and the Redis wire to the frontend's adapter; the
fake Discord shows that only the question and the end of the run mention the person."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.adapters.discord.harness import button, shown, thread_of
from tests.scale.test_discord_roles_e2e import role, scale_out
from tests.support.cli import WAIT, bridge_process
from tests.support.fake_discord import ALICE, GENERAL
from tests.support.fake_llm import Reply, ToolCall
from tests.support.redis_server import redis_server_bin

if TYPE_CHECKING:
    from tests.scale.test_discord_roles_e2e import ScaleOut
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(300),
]


def every_end_pings(env: dict[str, str]) -> dict[str, str]:
    config = Path(env["PI_BRIDGE_CONFIG"])
    config.write_text(config.read_text() + "[notify]\nquiet_under = 0\n", encoding="utf-8")
    return env


async def start(run: ScaleOut, name: str) -> None:
    """The process `name`, its configuration saying that every run's end pings."""
    env = every_end_pings(role(run.tmp_path, run.env, name))
    process = bridge_process(run.tmp_path, env, f"{name}.log")
    run.processes[name] = await run.stack.enter_async_context(process)


async def test_the_question_and_the_end_ping_through_a_frontend_and_a_worker(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add(
        "wipe it",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf ./src"})]),
        Reply(text="Wiped the sources."),
    )
    async with scale_out(tmp_path, agent_home) as (run, fake, _):
        await start(run, "f1")
        await start(run, "w1")
        mention = await fake.user_says(GENERAL, "wipe it", mentions_bot=True)
        thread = await thread_of(fake, mention, WAIT)
        question = await shown(fake, "Approve this", thread.id, WAIT)
        assert question.pinged == [ALICE.id]
        await fake.press(question, button(question, "Allow once"))
        ping = await shown(fake, ": Wiped the sources.", thread.id, WAIT)
        assert ping.pinged == [ALICE.id]
        posted = [m for m in fake.messages(thread.id) if m.from_bot and m.interaction_id is None]
        assert [m.id for m in posted if not m.silent] == [question.id, ping.id]
        await run.stop("w1")
        await run.stop("f1")

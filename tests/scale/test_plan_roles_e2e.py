"""Plan first in a scale-out: a frontend and workers as `pi-bridge run` processes on a
real redis-server, the fake Telegram, the real agent against the fake LLM.

The plan lives in the conversation's record on Redis, so its buttons outlive the
worker that showed them: the plan is made on w1, w1 stops, and Execute pressed then
is carried out by w2, which reads the plan from the store, edits the same message
and ticks its steps there.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from bridge.options import safe_name
from tests.scale.test_worker_restart_e2e import CHAT, env_for, role
from tests.support.cli import WAIT, bridge_process, kill_agents, stop
from tests.support.fake_telegram import FakeTelegram
from tests.support.journeys import tool_results
from tests.support.redis_server import RedisServer, redis_client, redis_server_bin
from tests.test_plan_e2e import REFUSED, script

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(300),
]

LEASE = f"pi-bridge:scale:lease:tg:{CHAT}"


async def test_a_plan_made_on_one_worker_is_executed_by_another_from_the_store(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    script(fake_llm)
    pear = tmp_path / "data" / "workspaces" / safe_name(f"tg:{CHAT}") / "pear.txt"
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram, redis_client(redis.url) as client:
            # The agent stops with w1: w2 has nothing of the conversation in memory.
            env = env_for(tmp_path, agent_home, telegram, redis.url) | {"PI_BRIDGE_ON_STOP": "stop"}
            try:
                async with contextlib.AsyncExitStack() as stack:

                    async def start(name: str, log: str = "") -> Process:
                        settings = role(tmp_path, env, name)
                        process = bridge_process(tmp_path, settings, log or f"{name}.log")
                        return await stack.enter_async_context(process)

                    front = await start("f1")
                    w1 = await start("w1")
                    telegram.message(CHAT, "/plan put a pear in the workspace")
                    plan = await telegram.bot_message("☐ 2. Write pear.txt", CHAT, within=WAIT)
                    await telegram.wait_for(lambda: len(plan.buttons) == 3, WAIT)
                    assert str(await client.get(LEASE)).startswith("w1/")
                    assert not pear.exists()
                    assert any(REFUSED in result for result in tool_results(fake_llm))

                    w2 = await start("w2")
                    assert await stop(w1) == 0
                    [execute] = [data for label, data in plan.buttons if "Execute" in label]
                    telegram.press(CHAT, plan.message_id, execute)
                    await telegram.wait_for(pear.exists, WAIT)
                    await telegram.wait_for(lambda: "☑ 2. Write pear.txt" in plan.text, WAIT)
                    await telegram.wait_for(lambda: "run is over" in plan.text, WAIT)
                    assert plan.buttons == []
                    assert str(await client.get(LEASE)).startswith("w2/")
                    assert await stop(w2) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")

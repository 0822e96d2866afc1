"""Nested tool calls in a scale-out: a frontend and a worker as `pi-bridge run`
processes on a real redis-server, the fake Discord (its 2000-character limit), and the
real pi 1.5.2 on the worker running the suite's `fanout.ts` tool, which runs `tick` 200
times through `ctx.executeTool()`. The thread gets one tool message, made by the worker
through the frontend's platform calls, whose sub-lines show the newest calls and count
the rest: the same view as with `--role all` (tests/test_nested_tools_e2e.py)."""

from __future__ import annotations

import contextlib
import re
import shlex
from typing import TYPE_CHECKING

import pytest

from tests.adapters.discord.harness import shown, thread_of
from tests.conftest import require_agent
from tests.scale.test_discord_roles_e2e import ScaleOut
from tests.support.cli import WAIT, cli_env, kill_agents
from tests.support.fake_discord import ALICE, GENERAL, TOKEN, FakeDiscord
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import EXTENSIONS
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(300),
]

NESTING_VERSION = "1.5.2"  # the first pinned agent with ctx.executeTool()
DISCORD_MAX = 2000


@contextlib.asynccontextmanager
async def scale_out(tmp_path: Path, home: AgentHome) -> AsyncIterator[tuple[ScaleOut, FakeDiscord]]:
    argv = home.argv(NESTING_VERSION, "-e", str(EXTENSIONS / "fanout.ts"))
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeDiscord(enforce_limits=True) as fake:
            env = cli_env(
                tmp_path,
                home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_AGENT_COMMAND=shlex.join(argv),
                DISCORD_BOT_TOKEN=TOKEN,
                DISCORD_API_URL=fake.api_url,
                DISCORD_ALLOWED_USERS=str(ALICE.id),
            )
            try:
                async with contextlib.AsyncExitStack() as stack:
                    yield ScaleOut(tmp_path, env, stack), fake
            finally:
                kill_agents(tmp_path / "data")


async def test_a_tool_with_two_hundred_nested_calls_is_one_message_through_the_roles(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    require_agent(NESTING_VERSION)
    call = ToolCall("fanout", {"count": 200, "failEvery": 40}, id="call_fan")
    fake_llm.add("fan out", Reply(tool_calls=[call]), Reply(text="Fanned out, from the worker."))
    async with scale_out(tmp_path, agent_home) as (run, fake):
        await run.start("f1")
        await run.start("w1")
        await fake.wait_for(lambda: len(fake.identified) == 1, WAIT)
        mention = await fake.user_says(GENERAL, "fan out please", mentions_bot=True)
        thread = await thread_of(fake, mention, WAIT)
        await shown(fake, "Fanned out, from the worker.", thread.id, WAIT)
        tool = await shown(fake, "FANOUT-DONE 200 calls, 5 failed", thread.id, WAIT)
        await run.stop("w1")
        await run.stop("f1")
    assert tool.content.startswith("✅ fanout"), tool.content
    hidden = re.search(r"… (\d+) earlier \((\d+) ✓, 4 ✗\)", tool.content)
    assert hidden is not None, tool.content
    assert int(hidden[1]) == int(hidden[2]) + 4  # the 5th failure is the newest, shown
    assert int(hidden[1]) + tool.content.count("↳ ") == 200  # Discord's limit shows fewer
    assert len(tool.content) <= DISCORD_MAX
    ticks = [m for m in fake.messages(thread.id) if "tick" in m.content]
    assert [m.id for m in ticks] == [tool.id], [m.content for m in ticks]
    assert fake.limited == []

"""Frontend and workers as processes on a real redis-server, with the fake Telegram
and the real agent: a message is answered through the split roles."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop, write_config
from tests.support.fake_llm import Reply
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
]

CHAT = 42


async def test_a_message_is_answered_through_a_frontend_and_a_worker(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("hello", Reply(text="Hello from a worker."))
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram:
            config = write_config(tmp_path, "[telegram]\npoll_timeout = 1\n")
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_CONFIG=config,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=str(CHAT),
            )
            try:
                async with contextlib.AsyncExitStack() as stack:
                    front = await stack.enter_async_context(
                        bridge_process(tmp_path, env | {"PI_BRIDGE_ROLE": "frontend"}, "f1.log")
                    )
                    w1 = await stack.enter_async_context(
                        bridge_process(tmp_path, env | {"PI_BRIDGE_ROLE": "worker"}, "w1.log")
                    )
                    telegram.message(CHAT, "hello there")
                    await telegram.bot_message("Hello from a worker.", CHAT, within=WAIT)
                    assert await stop(w1) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")

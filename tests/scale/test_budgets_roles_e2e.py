"""Usage and budgets in a scale-out, as processes: a frontend and workers on a real
redis-server, the fake Telegram and the real agent. The spend lives in Redis: an
answer replayed to a worker that took its running agent back is counted once, and a
limit reached on one worker refuses the next run on another."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from bridge.spend.report import money, tokens
from tests.support.agents import PRICES
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, role_env, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.redis_server import RedisServer, redis_client, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
]

CHAT = 42  # Alice's private chat: her user id too
LEASE_TTL = 60  # s: nothing here may wait for a lease to lapse
TOOL = "printf 'first-%s\\n' half; sleep 6; printf 'second-%s\\n' half"
USAGE = f"pi-bridge:usage:person:{CHAT}"


def env_for(tmp_path: Path, home: AgentHome, telegram: FakeTelegram, url: str) -> dict[str, str]:
    return cli_env(
        tmp_path,
        home,
        PI_BRIDGE_STORE=url,
        PI_BRIDGE_ON_STOP="detach",
        PI_BRIDGE_APPROVALS="off",
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
        TELEGRAM_ALLOWED_USERS=str(CHAT),
    )


def role(tmp_path: Path, env: dict[str, str], name: str, budgets: str) -> dict[str, str]:
    """A frontend ("f…") or a worker of that name, each with its own config file."""
    config = (
        f'[telegram]\npoll_timeout = 1\n[worker]\nname = "{name}"\nlease_ttl = {LEASE_TTL}\n'
        + budgets
    )
    return role_env(tmp_path, env, name, config)


def reported(fake_llm: FakeLLM) -> tuple[int, int, float]:
    answered = [r.usage for r in fake_llm.requests if r.status == 200 and r.usage]
    prompt = sum(int(u["prompt_tokens"]) for u in answered)
    completion = sum(int(u["completion_tokens"]) for u in answered)
    return prompt, completion, (prompt * PRICES["input"] + completion * PRICES["output"]) / 1e6


async def test_an_answer_replayed_to_a_worker_that_took_its_agent_back_counts_once(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add(
        "long job", Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]), Reply(text="Done.")
    )
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram, redis_client(redis.url) as client:
            env = env_for(tmp_path, agent_home, telegram, redis.url)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    start = stack.enter_async_context
                    front = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "f1", ""), "f1.log")
                    )
                    first = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "w1", ""), "w1-first.log")
                    )
                    telegram.message(CHAT, "start the long job")
                    status = await telegram.bot_message("⏳ working", CHAT, within=WAIT)
                    await telegram.bot_message("first-half", CHAT, within=WAIT)
                    assert await client.zcard(USAGE) == 1  # the first answer, kept
                    assert await stop(first) == 0  # detaches: the agent runs on
                    again = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "w1", ""), "w1-again.log")
                    )
                    # The run is replayed to the new instance from its start.
                    await telegram.wait_for(lambda: "✅ done" in status.text, WAIT)
                    telegram.message(CHAT, "/usage")
                    table = await telegram.bot_message("📊", CHAT, within=WAIT)
                    assert await client.zcard(USAGE) == 2
                    assert await stop(again) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")
    prompt, completion, cost = reported(fake_llm)
    assert len([r for r in fake_llm.requests if r.usage]) == 2
    cost_rows = [line.split() for line in table.text.splitlines() if line.split()[:1] == ["cost"]]
    assert cost_rows[0] == ["cost", money(cost), money(cost), money(cost)], table.text
    flat = " ".join(table.text.split())
    assert f"in {tokens(prompt)}" in flat
    assert f"out {tokens(completion)}" in flat


async def test_a_limit_reached_on_one_worker_refuses_the_next_run_on_another(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("first", Reply(text="First answer."))
    budgets = "[budgets.person]\ndaily = 0.01\n"
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram:
            env = env_for(tmp_path, agent_home, telegram, redis.url)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    start = stack.enter_async_context

                    def process(name: str) -> contextlib.AbstractAsyncContextManager[Process]:
                        return bridge_process(
                            tmp_path, role(tmp_path, env, name, budgets), f"{name}.log"
                        )

                    front = await start(process("f1"))
                    w1 = await start(process("w1"))
                    telegram.message(CHAT, "first question")
                    await telegram.bot_message("✅ done", CHAT, within=WAIT)
                    w2 = await start(process("w2"))
                    assert await stop(w1) == 0  # its conversation goes to w2
                    asked = len(fake_llm.requests)
                    telegram.message(CHAT, "second question")
                    refusal = await telegram.bot_message("⛔ Not started", CHAT, within=WAIT)
                    assert "daily budget is used up" in refusal.text
                    assert len(fake_llm.requests) == asked
                    assert await stop(w2) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")

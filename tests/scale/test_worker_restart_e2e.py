"""A worker stopped on purpose, as processes on a real redis-server with the fake
Telegram and the real agent: SIGTERM hands its idle conversations over at once (the
next message is answered by another worker long before the lease could lapse), and a
worker restarted under its name takes its running agent back (the run goes on in the
same status message, again before the lease could lapse)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING

import anyio
import pytest

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

CHAT = 42
LEASE_TTL = 60  # s: nothing in these tests may wait for a lease to lapse
LEASE = f"pi-bridge:scale:lease:tg:{CHAT}"
TOOL = "printf 'first-%s\\n' half; sleep 8; printf 'second-%s\\n' half"


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


def role(tmp_path: Path, env: dict[str, str], name: str) -> dict[str, str]:
    """A frontend ("f…") or a worker of that name, each with its own config file."""
    config = f'[telegram]\npoll_timeout = 1\n[worker]\nname = "{name}"\nlease_ttl = {LEASE_TTL}\n'
    return role_env(tmp_path, env, name, config)


async def test_a_stopping_worker_hands_its_idle_conversation_to_another_at_once(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("first", Reply(text="First answer."))
    fake_llm.add("second", Reply(text="Second answer."))
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram, redis_client(redis.url) as client:
            env = env_for(tmp_path, agent_home, telegram, redis.url)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    start = stack.enter_async_context
                    front = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "f1"), "f1.log")
                    )
                    w1 = await start(bridge_process(tmp_path, role(tmp_path, env, "w1"), "w1.log"))
                    telegram.message(CHAT, "first question")
                    await telegram.bot_message("First answer.", CHAT, within=WAIT)
                    assert str(await client.get(LEASE)).startswith("w1/")
                    w2 = await start(bridge_process(tmp_path, role(tmp_path, env, "w2"), "w2.log"))
                    assert await stop(w1) == 0
                    stopped = time.monotonic()
                    telegram.message(CHAT, "second question")
                    await telegram.bot_message("Second answer.", CHAT, within=WAIT)
                    assert time.monotonic() - stopped < LEASE_TTL / 2, "waited for the lease"
                    assert str(await client.get(LEASE)).startswith("w2/")
                    assert await stop(w2) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")


async def test_a_worker_restarted_under_its_name_takes_its_running_agent_back(
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
                        bridge_process(tmp_path, role(tmp_path, env, "f1"), "f1.log")
                    )
                    first: Process = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "w1"), "w1-first.log")
                    )
                    telegram.message(CHAT, "start the long job")
                    status = await telegram.bot_message("⏳ working", CHAT, within=WAIT)
                    await telegram.bot_message("first-half", CHAT, within=WAIT)
                    before = str(await client.get(LEASE))
                    assert before.startswith("w1/")
                    assert await stop(first) == 0  # detaches: the agent runs on
                    stopped = time.monotonic()
                    again = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "w1"), "w1-again.log")
                    )
                    await telegram.wait_for(lambda: "✅ done" in status.text, WAIT)
                    assert time.monotonic() - stopped < LEASE_TTL / 2, "waited for the lease"
                    after = str(await client.get(LEASE))
                    assert after.startswith("w1/")
                    assert after != before  # the new instance holds it
                    assert await stop(again) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")
    texts = [m.text for m in telegram.bot_messages(CHAT)]
    assert len([t for t in texts if "Done." in t]) == 1, texts
    assert "interrupted" not in status.text
    assert "second-half" in status.text or any("second-half" in t for t in texts)
    assert len([r for r in fake_llm.requests if r.rule == "long job" and r.step == 0]) == 1


async def test_a_run_shown_done_stays_done_when_a_killed_worker_s_agent_is_taken_back(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    """Issue 34: a run's end is shown, but the next run begins before the run's last op
    (its reaction, failing for a while here) went out, so the run does not count as
    shown. The worker is killed in the next run; taken back, the agent's records are
    replayed from before the first run, whose opening would edit its "✅ done" back to
    "⏳ working…" with [⏹ Stop]."""
    fake_llm.add("quick job", Reply(text="Quick answer."))
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
                        bridge_process(tmp_path, role(tmp_path, env, "f1"), "f1.log")
                    )
                    first: Process = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "w1"), "w1-first.log")
                    )
                    telegram.fail("setMessageReaction", "Bad Gateway", status=502, times=4)
                    telegram.message(CHAT, "do the quick job")
                    await telegram.bot_message("Quick answer.", CHAT, within=WAIT)
                    done = await telegram.bot_message("✅ done", CHAT, within=WAIT)
                    telegram.message(CHAT, "start the long job")
                    await telegram.bot_message("first-half", CHAT, within=WAIT)
                    raw = await client.get(f"pi-bridge:conv:tg:{CHAT}")
                    host = json.loads(str(raw))["host"]
                    assert host["runs"] == 0, "the first run counts as shown: nothing to test"
                    first.kill()
                    await first.wait()
                    again = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "w1"), "w1-again.log")
                    )
                    await telegram.bot_message("Done.", CHAT, within=WAIT)
                    await telegram.wait_for(
                        lambda: (
                            len([m for m in telegram.bot_messages(CHAT) if "✅ done" in m.text])
                            == 2
                        ),
                        WAIT,
                    )
                    await anyio.sleep(2)  # a late edit would come now
                    assert await stop(again) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")
    edits = [
        str(c.params.get("text"))
        for c in telegram.calls_of("editMessageText")
        if str(c.params.get("message_id")) == str(done.message_id)
    ]
    final = next(i for i, text in enumerate(edits) if text.startswith("✅ done"))
    assert [t for t in edits[final:] if "working" in t] == [], edits
    assert done.text.startswith("✅ done"), done.text
    texts = [m.text for m in telegram.bot_messages(CHAT)]
    assert len([t for t in texts if "Quick answer." in t]) == 1, texts

"""A worker taking over a running agent starts from the snapshot of what its run has
shown, under `--role frontend` + `--role worker` on a real redis-server, with the fake
Telegram and the real agent (bridge/rpc/shown.py, bridge/conversation/hosts.py).

One chat runs the job with no handover: what the other chat must end as. The other runs
it on worker w1; once Redis holds a snapshot covering the second tool's first output, w1
is SIGKILLed and w2 takes the conversation and its agent over when the lease lapses. The
chat must end with the same messages, in the same order, with the same text (figures
aside). The host forgets what a stored snapshot covers, so a worker that ignored it
would miss the run's start.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

import anyio
import pytest
import redis.asyncio as aioredis

from bridge.rpc.shown import Snapshot
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, role_env, stop
from tests.support.fake_llm import Reply, ToolCall
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
    pytest.mark.timeout(240),
]

CHAT, PLAIN = 42, 43  # handed over mid-run; run with no handover
LEASE_TTL = 4  # s: w2 takes the dead w1's conversation over within lease + a renewal
WORDS = " ".join(f"w{n}" for n in range(1, 61))
ANSWER = f"All three steps are done: {WORDS} — the end."
# Their outputs are not in their commands, so seeing them means the tool got that far.
ONE = "printf 'one-%s\\n' out"
TWO = "printf 'two-%s\\n' out; sleep 15; printf 'three-%s\\n' out"


def script(fake_llm: FakeLLM) -> None:
    fake_llm.add(
        "snapshot job",
        Reply(text="Looking first.", tool_calls=[ToolCall("bash", {"command": ONE})]),
        Reply(text="Now the long part.", tool_calls=[ToolCall("bash", {"command": TWO})]),
        Reply(text=ANSWER, delay=0.01),
    )


def role(tmp_path: Path, env: dict[str, str], name: str) -> dict[str, str]:
    """A frontend ("f…") or a worker of that name, each with its own config file."""
    config = (
        '[telegram]\npoll_timeout = 1\n[agents]\non_stop = "detach"\n'
        f'[worker]\nname = "{name}"\nlease_ttl = {LEASE_TTL}\n'
    )
    return role_env(tmp_path, env, name, config)


def chat_of(telegram: FakeTelegram, chat: int) -> list[str]:
    """The chat as its reader sees it, figures (durations, tokens, cost) as `#`."""
    return [re.sub(r"\d+(?:[.,]\d+)*", "#", m.text) for m in telegram.bot_messages(chat)]


async def snapshot_with(client: aioredis.Redis, key: str, text: bytes) -> Snapshot:
    """The snapshot Redis holds of `key`, once one covers `text`."""
    with anyio.fail_after(WAIT):
        while True:
            stored = str(await client.hget(f"pi-bridge:shown:{key}", "snapshot") or "") or None
            snapshot = Snapshot.decode(stored) if stored is not None else None
            if snapshot is not None and any(text in data for _, data in snapshot.records):
                return snapshot
            await anyio.sleep(0.1)


async def test_a_worker_taking_a_run_over_ends_the_chat_as_without_handover(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    script(fake_llm)
    data = tmp_path / "data"
    with RedisServer(tmp_path / "redis") as redis:
        client = aioredis.from_url(redis.url, decode_responses=True)
        async with FakeTelegram() as telegram:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_ON_STOP="detach",
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=f"{CHAT},{PLAIN}",
            )
            try:
                async with contextlib.AsyncExitStack() as stack:
                    start = stack.enter_async_context
                    front = await start(
                        bridge_process(tmp_path, role(tmp_path, env, "f1"), "f1.log")
                    )
                    w1 = await start(bridge_process(tmp_path, role(tmp_path, env, "w1"), "w1.log"))
                    telegram.message(PLAIN, "run the snapshot job")
                    plain = await telegram.bot_message("⏳ working", PLAIN, within=WAIT)
                    await telegram.wait_for(lambda: "✅ done" in plain.text, WAIT)
                    telegram.message(CHAT, "run the snapshot job")
                    status = await telegram.bot_message("⏳ working", CHAT, within=WAIT)
                    await telegram.bot_message("two-out", CHAT, within=WAIT)
                    await snapshot_with(client, f"tg:{CHAT}", b"two-out")
                    w2 = await start(bridge_process(tmp_path, role(tmp_path, env, "w2"), "w2.log"))
                    w1.kill()
                    await w1.wait()
                    assert not any("three-out" in text for text in chat_of(telegram, CHAT))
                    await telegram.wait_for(lambda: "✅ done" in status.text, WAIT)
                    await telegram.bot_message("the end.", CHAT, within=WAIT)
                    await anyio.sleep(1)  # any late edit or send would land by now
                    assert await stop(w2) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(data)
                await client.aclose()
    assert chat_of(telegram, CHAT) == chat_of(telegram, PLAIN)
    assert sum(ANSWER in m.text for m in telegram.bot_messages(CHAT)) == 1
    log = (tmp_path / "w2.log").read_text(errors="replace")
    assert "taken back from a snapshot" in log

"""Issue 34: how soon a SIGKILLed worker's conversations have a new owner, as processes
(a frontend and two workers) on a real redis-server, the fake Telegram and real agents.

The bound (docs/operations.md, "a worker dies"): a lease lapses at most `lease_ttl`
after its holder's last renewal, and a worker with room looks for lapsed leases every
min(1 s, lease_ttl / 3), so each conversation is another worker's at most `lease_ttl`
+ 1 s after the last renewal before the death (and so after the death).

Worker 1 owns three conversations: two idle, one running a tool. The test waits for
one of its renewals (the lapse scores in Redis move) and kills it right after: the
worst case, its leases then live a whole `lease_ttl` past the kill. Each lease key is
then polled until worker 2 holds it; the time is Redis's own clock, the one the lapse
scores are on.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, role_env, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.redis_server import RedisServer, redis_client, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    import redis.asyncio as aioredis

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(240),
]

IDLE = (51, 52)  # chats answered before the kill, idle at it
RUNNING = 53  # a chat whose run goes on through the kill
CHATS = (*IDLE, RUNNING)
# s: the default, which issue 34 measured with; a takeover loop looking as seldom as
# every lease_ttl / 2 (as before) or lease_ttl misses the bound in most runs.
LEASE_TTL = 15.0
LOOK = min(1.0, LEASE_TTL / 3)  # how often a worker looks for lapsed leases
# Loaded 2-core machine: the claim's Redis round trips, a worker busy taking another
# conversation over (agent and all) before this one, a poll of this test's.
MARGIN = 1.5
BOUND = LEASE_TTL + LOOK + MARGIN  # s from the last renewal before the kill
PREFIX = "pi-bridge:scale:"
TOOL = "printf 'first-%s\\n' half; sleep 45; printf 'second-%s\\n' half"


def user(chat: int) -> dict[str, object]:
    """Each chat is its own user's private chat."""
    return {"id": chat, "is_bot": False, "first_name": f"User {chat}"}


def lease(chat: int) -> str:
    return f"{PREFIX}lease:tg:{chat}"


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
        TELEGRAM_ALLOWED_USERS=",".join(str(c) for c in CHATS),
    )


def role(tmp_path: Path, env: dict[str, str], name: str) -> dict[str, str]:
    """A frontend ("f…") or a worker of that name, each with its own config file."""
    config = f'[telegram]\npoll_timeout = 1\n[worker]\nname = "{name}"\nlease_ttl = {LEASE_TTL}\n'
    return role_env(tmp_path, env, name, config)


async def now(client: aioredis.Redis) -> float:
    """Redis's clock, in s."""
    seconds, micros = await client.time()
    return int(seconds) + int(micros) / 1e6


async def lapses(client: aioredis.Redis) -> dict[int, float]:
    """When each chat's lease lapses (s, Redis's clock), by the lapse index."""
    found = {}
    for chat in CHATS:
        score = await client.zscore(f"{PREFIX}lapse", f"tg:{chat}")
        found[chat] = float(score or 0) / 1000
    return found


async def serving(log: Path) -> None:
    """The worker says it serves: its loops run."""
    with anyio.fail_after(WAIT):
        while "serving (up to" not in await anyio.Path(log).read_text(errors="replace"):  # noqa: ASYNC110
            await anyio.sleep(0.1)


async def test_a_killed_worker_s_conversations_move_within_the_lease_and_a_look(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("follow-up", Reply(text="Follow-up answer."))
    fake_llm.add("idle question", Reply(text="Idle answer."))
    fake_llm.add(
        "long job", Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]), Reply(text="Done.")
    )
    moved: dict[int, float] = {}
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
                    for chat in IDLE:
                        telegram.message(chat, "an idle question", user=user(chat))
                    telegram.message(RUNNING, "start the long job", user=user(RUNNING))
                    for chat in IDLE:
                        await telegram.bot_message("Idle answer.", chat, within=WAIT)
                    await telegram.bot_message("first-half", RUNNING, within=WAIT)
                    for chat in CHATS:
                        assert str(await client.get(lease(chat))).startswith("w1/")
                    w2 = await start(bridge_process(tmp_path, role(tmp_path, env, "w2"), "w2.log"))
                    await serving(tmp_path / "w2.log")

                    # Kill right after a renewal: the leases then outlive the kill longest.
                    before = await lapses(client)
                    with anyio.fail_after(LEASE_TTL):
                        while (after := await lapses(client)) == before:  # noqa: ASYNC110
                            await anyio.sleep(0.02)
                    killed = await now(client)
                    w1.kill()
                    await w1.wait()
                    last = await lapses(client)  # nothing renews them any more
                    assert last == after or all(last[c] >= after[c] for c in CHATS)

                    with anyio.fail_after(LEASE_TTL + WAIT):
                        while len(moved) < len(CHATS):
                            for chat in CHATS:
                                value = await client.get(lease(chat))
                                if chat not in moved and str(value).startswith("w2/"):
                                    moved[chat] = await now(client)
                            await anyio.sleep(0.02)

                    # The new owner works: a new message is answered.
                    telegram.message(IDLE[0], "a follow-up", user=user(IDLE[0]))
                    await telegram.bot_message("Follow-up answer.", IDLE[0], within=WAIT)
                    assert str(await client.get(lease(IDLE[0]))).startswith("w2/")
                    assert await stop(w2) == 0
                    assert await stop(front) == 0
            finally:
                kill_agents(tmp_path / "data")

    renewed = {chat: last[chat] - LEASE_TTL for chat in CHATS}
    figures = {
        chat: (
            round(moved[chat] - killed, 2),
            round(moved[chat] - renewed[chat], 2),
            round(moved[chat] - last[chat], 2),
        )
        for chat in CHATS
    }
    print(f"(after the kill, after the last renewal, after the lapse) s: {figures}")
    for chat in CHATS:
        assert renewed[chat] <= killed, "renewed after the kill?"
        assert last[chat] - killed > LEASE_TTL - 1, "not killed right after a renewal"
        assert moved[chat] >= last[chat] - 0.05, f"tg:{chat} taken before its lease lapsed"
        assert moved[chat] - renewed[chat] <= BOUND, figures
        assert moved[chat] - killed <= BOUND, figures

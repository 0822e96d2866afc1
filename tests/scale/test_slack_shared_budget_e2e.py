"""A workspace-wide Slack limit is one budget for a whole scale-out: `pi-bridge run`
processes (a frontend and two workers) on a real redis-server, the real slack-bolt
against the fake Slack, real agents against the fake LLM.

`[slack] edits_per_minute` holds "over the whole workspace" (docs/configuration.md).
Before issue 34 each worker kept its own budget of it: with three workers Slack saw
75 to 88 chat.update calls a minute for a budget of 50. The workers now take every
per-method budget from Redis (bridge/scale/budget.py, `SharedRates`), so the calls
counted at the fake keep to one budget. Each worker takes at most `MAX_AGENTS`
conversations, so both work at once.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest
import redis.asyncio as aioredis

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop
from tests.support.fake_llm import Reply
from tests.support.fake_slack import ALICE, CHANNEL, FakeSlack
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(400),
]

EDITS_PER_MINUTE = 30
EDIT_BURST = 10  # adapters/slack/adapter.py: LIMITS.edit_burst
THREADS = 4
MAX_AGENTS = 2  # per worker: the threads spread over both
WORDS = 150  # one every 50 ms: each answer grows for about 8 s, wanting an edit a second
ANSWER = " ".join(f"w{n}" for n in range(WORDS)) + " END"


def configured(tmp_path: Path, env: dict[str, str], name: str, role: str) -> dict[str, str]:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[worker]\nname = "{name}"\nlease_ttl = 3\nmax_agents = {MAX_AGENTS}\n'
        f'[slack]\nstreaming = "edit"\nedits_per_minute = {EDITS_PER_MINUTE}\n',
        encoding="utf-8",
    )
    return env | {"PI_BRIDGE_CONFIG": str(path), "PI_BRIDGE_ROLE": role}


async def test_two_workers_share_one_budget_of_chat_updates(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("long answer", Reply(text=ANSWER, delay=0.05))
    roles = ("frontend", "worker", "worker")
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeSlack() as slack, contextlib.AsyncExitStack() as stack:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                SLACK_BOT_TOKEN=slack.bot_token,
                SLACK_APP_TOKEN=slack.app_token,
                SLACK_API_BASE_URL=slack.base_url,
                SLACK_ALLOWED_USERS=ALICE,
            )
            try:
                processes = [
                    await stack.enter_async_context(
                        bridge_process(
                            tmp_path, configured(tmp_path, env, f"p{n}", role), f"p{n}.log"
                        )
                    )
                    for n, role in enumerate(roles)
                ]
                await slack.connected()
                await anyio.sleep(2.0)  # both workers up and claiming
                roots = [
                    str(
                        (await slack.mention(f"long answer {n}", channel=CHANNEL))["payload"][
                            "event"
                        ]["ts"]
                    )
                    for n in range(THREADS)
                ]

                holders: set[str] = set()
                client = aioredis.from_url(redis.url, decode_responses=True)
                stack.push_async_callback(client.aclose)

                async def note_holders() -> None:
                    while True:
                        async for key in client.scan_iter(match="*lease:slack:*"):
                            holder = await client.get(key)
                            if holder:
                                holders.add(str(holder).split("/")[0])
                        await anyio.sleep(0.3)

                def whole() -> bool:
                    shown = {
                        m.thread_ts
                        for m in slack.messages.values()
                        if not m.deleted and "END" in m.visible
                    }
                    return all(root in shown for root in roots)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(note_holders)
                    await slack.wait_until(whole, 4 * WAIT)
                    tg.cancel_scope.cancel()
                await anyio.sleep(3.0)  # the runs' last status edits
                for process in reversed(processes):
                    assert await stop(process) == 0
            finally:
                kill_agents(tmp_path / "data")
    updates = sorted(c.at for c in slack.called("chat.update"))
    assert len(updates) > EDIT_BURST  # the budget was what held them back
    span = updates[-1] - updates[0]
    allowed = EDIT_BURST + span * EDITS_PER_MINUTE / 60
    assert len(updates) <= allowed + 1, (len(updates), span)
    # Both workers answered at once: the budget was shared, not one worker's alone.
    assert {"p1", "p2"} <= holders, holders
    # Four threads of one channel at once: the runs' statuses give way to the answers
    # for the channel's posts, and still each thread shows its run's status once,
    # ended (answers before statuses; issue 34).
    for root in roots:
        statuses = [
            m.visible
            for m in slack.messages.values()
            if m.thread_ts == root
            and not m.deleted
            and ("working" in m.visible or "✅" in m.visible)
        ]
        assert [text.split(" ·")[0] for text in statuses] == ["✅ done"], (root, statuses)

"""Slack's native streaming is the same with `--role all` and with a frontend and a
worker on Redis: `pi-bridge run` processes, the real slack-bolt over Socket Mode
against the fake Slack, the real agent against the fake LLM.

A stream in a channel's thread must name its reader (chat.startStream's
recipient_team_id / recipient_user_id). The frontend sees who wrote; the worker that
answers, and the frontend that makes its calls, know it only from the chat the message
carried (`ChatRef.reader`). Before, a worker never streamed: 0 chat.startStream calls
in 53 runs under the roles, against 18 of 30 with `--role all`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop
from tests.support.fake_llm import Reply
from tests.support.fake_slack import ALICE, TEAM, FakeSlack
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(300),
]

ANSWER = "Streamed from wherever the conversation lives, one word after another."


def configured(tmp_path: Path, env: dict[str, str], name: str, role: str) -> dict[str, str]:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[worker]\nname = "{name}"\nlease_ttl = 3\n', encoding="utf-8")
    return env | {"PI_BRIDGE_CONFIG": str(path), "PI_BRIDGE_ROLE": role}


@pytest.mark.parametrize("roles", [("all",), ("frontend", "worker")], ids=["all", "split"])
async def test_a_thread_answer_streams_natively_to_its_reader_in_every_role(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, roles: tuple[str, ...]
) -> None:
    fake_llm.add("stream", Reply(text=ANSWER, delay=0.05))
    fake_llm.add("again", Reply(text="And the follow-up streams too."))
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
                root = str((await slack.mention("stream it please"))["payload"]["event"]["ts"])
                started = await slack.wait_for(
                    "chat.startStream", lambda c: c.args.get("thread_ts") == root, WAIT
                )
                await slack.wait_until(
                    lambda: any(ANSWER in m.visible for m in slack.messages.values()), WAIT
                )
                await slack.thread_message("again", root)
                await slack.wait_until(
                    lambda: any("follow-up streams" in m.visible for m in slack.messages.values()),
                    WAIT,
                )
                for process in reversed(processes):
                    assert await stop(process) == 0
            finally:
                kill_agents(tmp_path / "data")
    assert started.args.get("recipient_user_id") == ALICE
    assert started.args.get("recipient_team_id") == TEAM
    streams = [c for c in slack.called("chat.startStream") if c.args.get("thread_ts") == root]
    assert len(streams) == 2  # each answer is its own stream
    assert not [c for c in slack.called("chat.update") if ANSWER[:20] in str(c.args)]

"""/pr in a scale-out: a frontend and a worker as `pi-bridge run` processes on a real
redis-server, the real discord.py against the fake Discord, the real agent against the
fake LLM, a bare repository on disk as the remote and the fake GitHub.

The worker commits, pushes and opens the request; its number and link are in the
conversation's record in Redis. That worker then stops and another takes the
conversation over: `/pr` there tells the same request's state, read from the store.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

import pytest
import redis.asyncio as aioredis

from adapters.discord.convert import thread_key
from tests.adapters.discord.harness import button, shown, thread_of
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop
from tests.support.fake_discord import ALICE, GENERAL, GUILD_ID, TOKEN, FakeDiscord
from tests.support.fake_github import FakeGitHub
from tests.support.fake_llm import Reply, ToolCall
from tests.support.gitrepo import git, make_repo
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

LEASE_TTL = 3
PREFIX = "pi-bridge:"  # the store's keys (bridge/store/redis.py)
PR_TOKEN = "ghp-roles-s3cret-4242"


def config(tmp_path: Path, name: str, bare: Path, repo: Path, api: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[worker]\nname = "{name}"\nlease_ttl = {LEASE_TTL}\n\n'
        f'[projects.web]\npath = "{repo}"\nbase = "main"\nremote = "{bare}"\n'
        f'remote_token_env = "PI_TEST_PR_TOKEN"\nforge = "github"\n'
        f'forge_api_url = "{api}"\nforge_repository = "acme/web"\n\n'
        f'[chats."discord:{GUILD_ID}:{GENERAL}"]\nproject = "web"\nverbosity = "off"\n',
        encoding="utf-8",
    )
    return path


async def test_the_pull_request_lives_in_the_store_and_another_worker_tells_its_state(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add(
        "make version two",
        Reply(tool_calls=[ToolCall("write", {"path": "app.py", "content": "print('v2')\n"})]),
        Reply(text="Version two is written."),
    )
    repo = make_repo(tmp_path / "web")
    (tmp_path / "remote").mkdir()
    bare = tmp_path / "remote" / "web.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    with RedisServer(tmp_path / "redis") as redis:
        async with (
            FakeDiscord(enforce_limits=True) as fake,
            FakeGitHub(bare, token=PR_TOKEN) as hub,
        ):
            client = aioredis.from_url(redis.url, decode_responses=True)
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_APPROVALS="off",
                DISCORD_BOT_TOKEN=TOKEN,
                DISCORD_API_URL=fake.api_url,
                DISCORD_ALLOWED_USERS=str(ALICE.id),
                PI_TEST_PR_TOKEN=PR_TOKEN,
            )

            def role(name: str) -> dict[str, str]:
                kind = "frontend" if name.startswith("f") else "worker"
                path = config(tmp_path, name, bare, repo, hub.url)
                return env | {"PI_BRIDGE_CONFIG": str(path), "PI_BRIDGE_ROLE": kind}

            try:
                async with contextlib.AsyncExitStack() as stack:
                    f1 = await stack.enter_async_context(
                        bridge_process(tmp_path, role("f1"), "f1.log")
                    )
                    w1 = await stack.enter_async_context(
                        bridge_process(tmp_path, role("w1"), "w1.log")
                    )
                    # Both processes start from nothing: the gateway waits for the first.
                    await fake.wait_for(lambda: len(fake.identified) == 1, WAIT)
                    mention = await fake.user_says(GENERAL, "make version two", mentions_bot=True)
                    thread = await thread_of(fake, mention, WAIT)
                    await shown(fake, "Version two is written.", thread.id, WAIT)
                    await fake.user_says(thread.id, "/pr Version two\nThe app prints v2.")
                    question = await shown(fake, "uncommitted file", thread.id, WAIT)
                    await fake.press(question, button(question, "Commit and push"))
                    opened = await shown(fake, "Opened pull request #1", thread.id, WAIT)
                    key = thread_key(str(GUILD_ID), str(GENERAL), str(thread.id))
                    stored = json.loads(str(await client.get(f"{PREFIX}conv:{key}")))
                    assert await stop(w1) == 0

                    await stack.enter_async_context(bridge_process(tmp_path, role("w2"), "w2.log"))
                    await fake.user_says(thread.id, "/pr")
                    state = await shown(fake, "Pull request #1: open", thread.id, WAIT + LEASE_TTL)
                    assert await stop(f1) == 0
            finally:
                await client.aclose()
                kill_agents(tmp_path / "data")
    assert stored["pull_request"]["number"] == 1
    assert stored["pull_request"]["url"] == "https://github.example/acme/web/pull/1"
    assert stored["pull_request"]["title"] == "Version two"
    [pull] = hub.pulls
    assert (pull.title, pull.body) == ("Version two", "The app prints v2.")
    assert "https://github.example/acme/web/pull/1" in opened.content
    assert "Nothing new to push" in state.content
    logs = "".join((tmp_path / f"{n}.log").read_text(errors="replace") for n in ("f1", "w1", "w2"))
    assert PR_TOKEN not in logs

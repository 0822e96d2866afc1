"""Discord in a scale-out, end to end: frontends and a worker as `pi-bridge run`
processes on a real redis-server, configured by the DISCORD_* names alone, the real
discord.py against the fake Discord, the real agent against the fake LLM.

- A mention reaches the frontend that holds the gateway, which opens its thread and
  forwards it; the worker owns the conversation (its lease) and answers through the
  frontends' platform calls.
- The gateway connection is held by one frontend at a time, by the `poll:discord` lease
  as Telegram's long poll is: a second frontend logs in and syncs its commands but does
  not connect while the first holds it, and connects once the first stops.
- "Deny with reason…" pressed on a frontend that did not post the question still opens
  its modal (the form comes from Redis, `bridge/scale/forms.py`), and the reason reaches
  the agent on the worker.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest
import redis.asyncio as aioredis

from adapters.discord.convert import thread_key
from tests.adapters.discord.harness import button, shown, thread_of
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, role_env, stop
from tests.support.fake_discord import ALICE, GENERAL, GUILD_ID, TOKEN, FakeDiscord
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import tool_results
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
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

LEASE_TTL = 3  # s: a frontend asks for the gateway's lease every second
PREFIX = "pi-bridge:scale:"
HOLDS = "polling Discord"  # what a frontend logs when it takes the gateway's lease
COMMANDS = "/applications/*/commands"


def role(tmp_path: Path, env: dict[str, str], name: str) -> dict[str, str]:
    """A frontend ("f…") or a worker of that name, each with its own config file."""
    return role_env(tmp_path, env, name, f'[worker]\nname = "{name}"\nlease_ttl = {LEASE_TTL}\n')


class ScaleOut:
    """The processes of one test, started by name; each logs to `<name>.log`."""

    def __init__(self, tmp_path: Path, env: dict[str, str], stack: contextlib.AsyncExitStack):
        self.tmp_path, self.env, self.stack = tmp_path, env, stack
        self.processes: dict[str, Process] = {}

    async def start(self, name: str) -> Process:
        env = role(self.tmp_path, self.env, name)
        process = await self.stack.enter_async_context(
            bridge_process(self.tmp_path, env, f"{name}.log")
        )
        self.processes[name] = process
        return process

    async def stop(self, name: str) -> None:
        assert await stop(self.processes[name]) == 0, self.log(name)[-3000:]

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")


@contextlib.asynccontextmanager
async def scale_out(
    tmp_path: Path, home: AgentHome
) -> AsyncIterator[tuple[ScaleOut, FakeDiscord, aioredis.Redis]]:
    """redis-server, the fake Discord and a Redis client; the processes the test starts
    are stopped (or killed, with their agents) on the way out."""
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeDiscord(enforce_limits=True) as fake:
            client = aioredis.from_url(redis.url, decode_responses=True)
            env = cli_env(
                tmp_path,
                home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_APPROVALS="dangerous",
                DISCORD_BOT_TOKEN=TOKEN,
                DISCORD_API_URL=fake.api_url,
                DISCORD_ALLOWED_USERS=str(ALICE.id),
            )
            try:
                async with contextlib.AsyncExitStack() as stack:
                    yield ScaleOut(tmp_path, env, stack), fake, client
            finally:
                await client.aclose()
                kill_agents(tmp_path / "data")


async def first_frontend_connected(run: ScaleOut, fake: FakeDiscord) -> None:
    """f1 and w1 up, f1 on the gateway."""
    await run.start("f1")
    await run.start("w1")
    await fake.wait_for(lambda: len(fake.identified) == 1, WAIT)
    await fake.wait_for(lambda: HOLDS in run.log("f1"), WAIT)


async def second_frontend_waits(run: ScaleOut, fake: FakeDiscord) -> None:
    """f2 logs in and syncs the commands, but does not connect while f1 holds the
    gateway: not in three of its tries for the lease."""
    await run.start("f2")
    await fake.wait_for(lambda: len(fake.called("PUT", COMMANDS)) == 2, WAIT)
    await anyio.sleep(LEASE_TTL)
    assert len(fake.gateway.connections) == 1
    assert HOLDS not in run.log("f2")


async def gateway_moves_to_the_second(run: ScaleOut, fake: FakeDiscord) -> None:
    """f1 stops; f2 takes the lease and connects (a new session: nothing to RESUME)."""
    await run.stop("f1")
    await fake.wait_for(lambda: len(fake.identified) == 2, LEASE_TTL + 15)
    assert HOLDS in run.log("f2")
    assert len(fake.gateway.connections) == 2
    assert fake.resumes == 0


async def test_a_mention_is_answered_through_the_worker_and_one_frontend_holds_the_gateway(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("first question", Reply(text="First answer, from the worker."))
    fake_llm.add("second question", Reply(text="Second answer, after the handover."))
    async with scale_out(tmp_path, agent_home) as (run, fake, client):
        await first_frontend_connected(run, fake)
        mention = await fake.user_says(GENERAL, "first question", mentions_bot=True)
        thread = await thread_of(fake, mention, WAIT)
        await shown(fake, "First answer, from the worker.", thread.id, WAIT)
        key = thread_key(str(GUILD_ID), str(GENERAL), str(thread.id))
        assert str(await client.get(f"{PREFIX}lease:{key}")).startswith("w1/")
        await second_frontend_waits(run, fake)
        await gateway_moves_to_the_second(run, fake)
        await fake.user_says(thread.id, "second question")
        await shown(fake, "Second answer, after the handover.", thread.id, WAIT)
        await fake.wait_for(lambda: fake.reactions.get(mention.id) == ["✅"], WAIT)
        await run.stop("w1")
        await run.stop("f2")
    assert "serving discord" in run.log("w1")
    assert fake.limited == []
    assert TOKEN not in run.log("f1") + run.log("f2") + run.log("w1")


async def test_deny_with_reason_opens_its_modal_on_a_frontend_that_did_not_post_the_question(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add(
        "wipe it",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf ./src"})]),
        Reply(text="Kept the sources."),
    )
    async with scale_out(tmp_path, agent_home) as (run, fake, _):
        await first_frontend_connected(run, fake)
        mention = await fake.user_says(GENERAL, "wipe it", mentions_bot=True)
        thread = await thread_of(fake, mention, WAIT)
        question = await shown(fake, "Approve this", thread.id, WAIT)  # posted by f1
        await second_frontend_waits(run, fake)
        await gateway_moves_to_the_second(run, fake)
        pressed = await fake.press(question, button(question, "Deny with reason"))
        form = await fake.wait_for(lambda: next(iter(fake.modals), None), WAIT)
        [field] = form.fields
        submitted = await fake.submit_modal(form, {field.custom_id: "those are the tests"})
        await shown(fake, "Kept the sources.", thread.id, WAIT)
        await fake.wait_for(lambda: "Deny with reason" in fake.message(question.id).content, WAIT)
        await run.stop("w1")
        await run.stop("f2")
    assert pressed.response_type == 9  # the modal was the press's answer, within 3 s
    assert not pressed.failed
    assert not submitted.failed
    assert any("Denied in the chat: those are the tests" in r for r in tool_results(fake_llm))

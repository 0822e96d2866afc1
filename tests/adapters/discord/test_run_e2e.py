"""Discord through the composition root, as an operator runs it: `pi-bridge check` and
`pi-bridge run` as real subprocesses configured only by the DISCORD_* environment names,
the real discord.py against the fake Discord (pointed at it by DISCORD_API_URL alone),
the real agent against the fake LLM. The descriptor in bridge/app/platforms.py is all
that tells the app of Discord."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.adapters.discord.harness import shown, thread_of
from tests.support.cli import WAIT, bridge_process, cli_env, run_cli, stop
from tests.support.fake_discord import ALICE, GENERAL, TOKEN, FakeDiscord
from tests.support.fake_llm import Reply

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


def discord_env(fake: FakeDiscord) -> dict[str, str]:
    return {
        "DISCORD_BOT_TOKEN": TOKEN,
        "DISCORD_API_URL": fake.api_url,
        "DISCORD_ALLOWED_USERS": str(ALICE.id),
    }


async def test_pi_bridge_run_serves_discord_from_its_environment_names(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("from the cli", Reply(text="Served by pi-bridge run."))
    async with FakeDiscord(enforce_limits=True) as fake:
        env = cli_env(tmp_path, agent_home) | discord_env(fake)
        checked = await run_cli(tmp_path, env, "check")
        async with bridge_process(tmp_path, env, "run.log") as process:
            await fake.connected(within=WAIT)
            await fake.wait_for(lambda: fake.commands.get(None), WAIT)
            mention = await fake.user_says(GENERAL, "a question from the cli", mentions_bot=True)
            thread = await thread_of(fake, mention, within=WAIT)
            await shown(fake, "Served by pi-bridge run.", thread.id, within=WAIT)
            await shown(fake, "done", thread.id, within=WAIT)
            code = await stop(process)
    out = checked.stdout.decode()
    assert checked.returncode == 0, out + checked.stderr.decode()
    assert "✓ discord:" in out
    assert "Message Content intent is enabled" in out
    assert code == 0
    assert TOKEN not in (tmp_path / "run.log").read_text()

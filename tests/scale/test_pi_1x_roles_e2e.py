"""pi 1.x in a scale-out: a frontend and a worker as `pi-bridge run` processes on a real
redis-server, Discord's frontend against the fake Discord, the worker's agent 1.5.2.

What 1.x tells reaches the chat through the roles as it does in one process: the final
line of a run shows its tokens and the context in use (asked of the agent on the
worker), and a message an extension of the agent takes at once ("handled") ends
without a run and is marked done.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

import pytest

from tests.adapters.discord.harness import shown, thread_of
from tests.conftest import require_agent
from tests.scale.test_discord_roles_e2e import first_frontend_connected, scale_out
from tests.support.cli import WAIT
from tests.support.fake_discord import GENERAL
from tests.support.fake_llm import Reply
from tests.support.paths import EXTENSIONS
from tests.support.redis_server import redis_server_bin

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

NEWEST = "1.5.2"
SPENT = re.compile(r"✅ done · .* · \d+(\.\d)?k? tokens · \$\d+\.\d\d · context \d+ %")


async def test_the_final_line_and_a_handled_message_through_frontend_and_worker(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    require_agent(NEWEST)
    fake_llm.add("first question", Reply(text="First answer, from the worker."))
    argv = agent_home.argv(NEWEST, "-e", str(EXTENSIONS / "input-notes.ts"))
    async with scale_out(tmp_path, agent_home) as (run, fake, _):
        run.env["PI_BRIDGE_AGENT_COMMAND"] = shlex.join(argv)
        await first_frontend_connected(run, fake)
        mention = await fake.user_says(GENERAL, "first question", mentions_bot=True)
        thread = await thread_of(fake, mention, WAIT)
        await shown(fake, "First answer, from the worker.", thread.id, WAIT)
        final = await shown(fake, "✅ done", thread.id, WAIT)
        assert SPENT.search(final.content), final.content
        note = await fake.user_says(thread.id, "#note buy milk")
        await fake.wait_for(lambda: fake.reactions.get(note.id) == ["✅"], WAIT)
        await run.stop("w1")
        await run.stop("f1")
    assert all("#note" not in str(r.messages) for r in fake_llm.requests)

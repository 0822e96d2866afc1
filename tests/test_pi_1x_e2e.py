"""The whole bridge with what pi 1.x tells it (and what older agents tell of it).

Recording adapter → router → real agent on the fake LLM → renderer → outbox, as in
test_bridge_e2e.py: the context in use on /status and on a run's final line, a
message an extension takes at once while a run is on, and an error that mentions an
abort told from a stop by `agent_settled.aborted`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.conftest import require_agent
from tests.support.bridge_harness import options, running_bridge
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

NEWEST = "1.5.2"
NOTES = str(EXTENSIONS / "input-notes.ts")
CONTEXT = re.compile(r"^context \d+(\.\d)?k? / 128k \(\d+ %\)$", re.MULTILINE)
SPENT = re.compile(
    r" · \d+(\.\d)?k? tokens · \$\d+\.\d\d · context \d+ %$"
)  # the fake model is priced


def bridge_options(home: AgentHome, version: str, tmp_path: Path, *extra: str) -> BridgeOptions:
    return options(tmp_path / "data", home.argv(version, *extra), home.env())


async def test_status_and_a_run_s_final_line_show_the_context_in_use(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("hello", Reply(text="Hello from the fake model."))
    async with running_bridge(bridge_options(agent_home, version, tmp_path)) as chat:
        await chat.say("hello there")
        await chat.idle()
        final = await chat.shown("✅ done")
        assert SPENT.search(final), final
        await chat.say("/status")
        status = await chat.shown("model: ")
    assert CONTEXT.search(status), status


async def test_a_message_an_extension_takes_while_busy_is_done_at_once(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(NEWEST)
    fake_llm.add(
        "slow",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 2; echo slept"})]),
        Reply(text="Slept well."),
    )
    opts = bridge_options(agent_home, NEWEST, tmp_path, "-e", NOTES)
    async with running_bridge(opts) as chat:
        await chat.say("slow tool please")
        await chat.shown("🔧 bash")
        await chat.say("#note buy milk")
        marks = chat.adapter.reactions
        await chat.until(lambda: len({m for m, _ in marks}) == 2)
        note = [m for m, _ in marks][-1]
        await chat.until(lambda: (note, "done") in marks)
        assert chat.conversation_busy()  # taken at once, while the run goes on
        await chat.idle()
        await chat.shown("✅ done")
        assert "Not delivered" not in chat.all_text()
    assert [state for message, state in marks if message == note] == ["done"]
    assert all("#note" not in str(r.messages) for r in fake_llm.requests)


async def test_a_model_error_that_mentions_an_abort_is_a_failure_not_a_stop(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # Older agents say only how the last answer ended, so an error text about an abort
    # read as a stop; 1.x's agent_settled says nobody stopped this run.
    require_agent(NEWEST)
    fake_llm.add("broken", Reply(status=400, error_message="upstream request was aborted"))
    async with running_bridge(bridge_options(agent_home, NEWEST, tmp_path)) as chat:
        await chat.say("a broken request")
        await chat.idle()
        final = await chat.shown("⚠️ failed")
        assert "aborted" in final
        assert chat.find("⏹ stopped") is None

"""Nested tool calls on Slack: fake Slack (native streams, task_update's 256-character
fields) → bolt → SlackAdapter → Bridge → real pi 1.5.2 running the suite's `fanout.ts`
tool, which runs `tick` 3 or 200 times through `ctx.executeTool()`. The run's stream
has one task card, the fanout's, whose output lists its nested calls as sub-steps (a
tally and the newest few); no card and no message of their own."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from adapters.slack.runner import PREFIXES, slack_intake
from adapters.slack.settings import SlackSettings
from bridge.service import Bridge
from tests.adapters.slack.test_streams_e2e import LIMITS
from tests.conftest import require_agent
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, FakeSlack
from tests.support.fake_slack_streams import MAX_TASK_TEXT
from tests.support.flaky_store import open_flaky
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

NESTING_VERSION = "1.5.2"  # the first pinned agent with ctx.executeTool()
WAIT = 90.0


@contextlib.asynccontextmanager
async def slack_with_fanout(home: AgentHome, tmp_path: Path) -> AsyncIterator[FakeSlack]:
    """The fake Slack with the whole bridge on it; its agent has the fanout tool."""
    argv = home.argv(NESTING_VERSION, "-e", str(EXTENSIONS / "fanout.ts"))
    opts = options(tmp_path / "data", argv, home.env(), allowed_users=frozenset({ALICE}))
    store = await open_flaky(opts.data_dir, 0)
    try:
        async with FakeSlack() as slack:
            settings = SlackSettings(
                bot_token=slack.bot_token, api_base_url=slack.base_url, app_token=slack.app_token
            )
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
            adapter = SlackAdapter(client, limits=LIMITS)
            async with (
                Bridge(adapter, store, opts, prefixes=PREFIXES) as bridge,
                slack_intake(settings, bridge, adapter),
            ):
                yield slack
    finally:
        await store.aclose()


def run_done(slack: FakeSlack) -> bool:
    return any("✅ done" in m.visible for m in slack.messages.values() if not m.deleted)


@pytest.mark.parametrize(
    ("count", "tally"), [(3, "3 nested (2 ✓, 1 ✗)"), (200, "200 nested (100 ✓, 100 ✗)")]
)
async def test_nested_calls_are_sub_steps_of_their_parents_task_card(
    count: int, tally: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(NESTING_VERSION)
    call = ToolCall("fanout", {"count": count, "failEvery": 2}, id="call_fan")
    fake_llm.add("fan", Reply(tool_calls=[call]), Reply(text="Fanned out."))
    async with slack_with_fanout(agent_home, tmp_path) as slack:
        await slack.mention("fan out please")
        await slack.wait_until(lambda: run_done(slack), WAIT)
        [message] = [m for m in slack.messages.values() if m.stream is not None]
        stream = slack.stream(message.ts)
    assert list(stream.tasks) == ["call_fan"], list(stream.tasks)  # no card per nested call
    card = stream.tasks["call_fan"]
    assert card.status == "complete"
    assert card.output.startswith(tally), card.output
    assert f'tick  {{"n":{count},' in card.output  # the newest call is a sub-step (no code)
    assert f"FANOUT-DONE {count} calls" in card.output  # under them, the tool's own output
    assert all(len(state["output"]) <= MAX_TASK_TEXT for state in card.history)
    texts = [m.visible for m in slack.messages.values() if m.stream is None]
    assert not any("tick" in t for t in texts), texts

"""Plan first on Slack: fake Slack → bolt → `Bridge` → real pi agent with the shipped
gate → the fake LLM. The channel plans every task first (`plan_first`); the plan is one
message with three buttons, [✏ Revise…] asks in a modal (Slack has forms), and the plan
made again is executed, its checklist ticked in the same message."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.options import ChatOptions, safe_name
from tests.adapters.slack.test_e2e import WAIT, action_id, slack_bridge, until_shown
from tests.support.fake_slack import CHANNEL, TEAM
from tests.test_plan_e2e import REFUSED, script

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import FakeSlack, Posted

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


def cards_of(slack: FakeSlack) -> dict[str, str]:
    """Every task card of the bot's streams: title → status."""
    streams = [slack.stream(m.ts) for m in slack.messages.values() if m.stream is not None]
    return {task.title: task.status for stream in streams for task in stream.tasks.values()}


def labels(message: Posted) -> list[str]:
    return [
        str(e.get("text", {}).get("text", ""))
        for b in message.blocks
        for e in b.get("elements", [])
        if e.get("type") == "button"
    ]


async def test_a_channel_plans_first_revises_in_a_modal_and_ticks_the_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm)
    chats = {f"slack:{TEAM}:{CHANNEL}": ChatOptions(plan_first=True)}
    async with slack_bridge(agent_home, version, tmp_path, chats=chats) as slack:
        root = (await slack.mention("put a pear in the workspace"))["payload"]["event"]["ts"]
        key = f"slack:{TEAM}:{CHANNEL}:{root}"
        workspace = tmp_path / "data" / "workspaces" / safe_name(key)
        plan = await until_shown(slack, root, "☐ 2. Write pear.txt")
        await slack.wait_until(lambda: len(labels(slack.messages[plan.ts])) == 3, WAIT)
        assert labels(slack.messages[plan.ts]) == ["▶ Execute", "✏ Revise…", "✖ Cancel"]
        assert not (workspace / "pear.txt").exists()
        assert any(REFUSED in str(m.get("content")) for r in fake_llm.requests for m in r.messages)

        revise = action_id(slack.messages[plan.ts], "Revise")
        await slack.acked(await slack.press(plan.ts, revise))
        await slack.wait_until(lambda: bool(slack.views), WAIT)
        await slack.acked(await slack.submit_view(values={"answer": "add a plum too"}))
        again = await until_shown(slack, root, "☐ 3. Write plum.txt")
        await slack.wait_until(lambda: "revised: add a plum too" in plan.visible, WAIT)
        assert labels(slack.messages[plan.ts]) == []  # the first plan's buttons are gone

        await slack.wait_until(lambda: len(labels(slack.messages[again.ts])) == 3, WAIT)
        execute = action_id(slack.messages[again.ts], "Execute")
        await slack.acked(await slack.press(again.ts, execute))
        await slack.wait_until((workspace / "pear.txt").exists, WAIT)
        await slack.wait_until(lambda: "2 of 3 steps ticked" in again.visible, WAIT)
        assert "☑ 2. Write pear.txt" in again.visible
        assert "☐ 3. Write plum.txt" in again.visible
        # The run's stream shows each step ticked as a task card, beside the tool's.
        await slack.wait_until(lambda: "2. Write pear.txt" in cards_of(slack), WAIT)
        cards = cards_of(slack)
        assert cards["1. Read the notes"] == "complete"
        assert cards["2. Write pear.txt"] == "complete"
        assert "3. Write plum.txt" not in cards  # never said done
        assert any(title.startswith("write") for title in cards)

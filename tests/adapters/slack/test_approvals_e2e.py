"""The approval gate end to end on Slack: fake Slack → bolt → `Bridge` → real pi agent
with the shipped gate → the fake LLM. Slack has modals, so [Deny with reason…] asks
for the reason in one; an approver's copy of the question arrives in their direct
messages, and an answer there shows in the thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.options import ApprovalOptions
from tests.adapters.slack.test_e2e import BOB, WAIT, action_id, slack_bridge, until_shown
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import FakeSlack

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

ASKED = "Approve this"


def decided(slack: FakeSlack, ts: str, outcome: str) -> Callable[[], bool]:
    return lambda: outcome in slack.messages[ts].visible


async def test_deny_with_reason_is_typed_in_a_modal_and_reaches_the_agent(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "wipe it",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf ./src"})]),
        Reply(text="Kept the sources."),
    )
    gate = ApprovalOptions(mode="dangerous")
    async with slack_bridge(agent_home, version, tmp_path, approvals=gate) as slack:
        root = (await slack.mention("wipe it"))["payload"]["event"]["ts"]
        question = await until_shown(slack, root, ASKED)
        assert "rm -rf ./src" in question.visible
        await slack.acked(await slack.press(question.ts, action_id(question, "Deny with reason")))
        await slack.wait_until(lambda: bool(slack.views), WAIT)
        await slack.acked(await slack.submit_view(values={"answer": "those are the tests"}))
        await until_shown(slack, root, "Kept the sources.")
        await until_shown(slack, root, "chose: Deny with reason")
    assert any("Denied in the chat: those are the tests" in r for r in tool_results(fake_llm))


async def test_an_approver_allows_from_a_direct_message_and_the_thread_shows_who(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "force push",
        Reply(tool_calls=[ToolCall("bash", {"command": "git push -f origin main || echo no"})]),
        Reply(text="Pushed it."),
    )
    gate = ApprovalOptions(mode="dangerous", notify_approvers="dm")
    async with slack_bridge(
        agent_home, version, tmp_path, approvals=gate, approvers=frozenset({BOB})
    ) as slack:
        root = (await slack.mention("force push please"))["payload"]["event"]["ts"]
        here = await until_shown(slack, root, ASKED)
        dm = "D" + BOB[1:]
        await slack.wait_until(
            lambda: any(m.channel == dm and ASKED in m.visible for m in slack.messages.values()),
            WAIT,
        )
        [there] = [m for m in slack.messages.values() if m.channel == dm]
        await slack.acked(await slack.press(there.ts, action_id(there, "Allow once"), user=BOB))
        await until_shown(slack, root, "Pushed it.")
        for ts in (here.ts, there.ts):
            await slack.wait_until(decided(slack, ts, "chose: Allow once"), WAIT)
        assert not slack.messages[here.ts].blocks[-1].get("elements"), "buttons left behind"
        assert not slack.messages[there.ts].blocks[-1].get("elements"), "buttons left in the DM"
    results = tool_results(fake_llm)
    assert results
    assert not any("Denied" in r or "Not approved" in r for r in results), results

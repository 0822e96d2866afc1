"""The queue under the thumb on Slack, with each real agent: follow-ups sent in the
thread while the agent works carry [Steer now] and [Cancel]; only the thread's starter
or an approver may press them. Every model request is checked: the cancelled message
is in none, the pushed one in a request of the same run, before its final answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.adapters.slack.test_e2e import (
    BOB,
    CAROL,
    WAIT,
    action_id,
    find,
    slack_bridge,
    until_shown,
)
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import UNSTEERED

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

PUSHED = "Kiwi, as you asked."


async def test_an_approver_pushes_one_follow_up_the_starter_cancels_another_others_may_not(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "slowly",
        Reply(text="On it.", tool_calls=[ToolCall("bash", {"command": "sleep 8; echo slept"})]),
        Reply(text=UNSTEERED),
    )
    fake_llm.add("LATER-KIWI", Reply(text=PUSHED))
    async with slack_bridge(agent_home, version, tmp_path, stream=False) as slack:
        root = (await slack.mention("do it slowly"))["payload"]["event"]["ts"]
        await until_shown(slack, root, "bash")
        await slack.thread_message("!later LATER-KIWI please", root)
        kiwi = await until_shown(slack, root, "waiting for the end of the run: “LATER-KIWI")
        await slack.thread_message("!later SECOND-FIG too", root)
        fig = await until_shown(slack, root, "waiting for the end of the run: “SECOND-FIG")
        # Bob may talk here, but neither started the thread nor approves.
        await slack.acked(await slack.press(kiwi.ts, action_id(kiwi, "Cancel"), user=BOB))
        refusal = await slack.wait_for(
            "chat.postEphemeral", lambda c: c.args.get("user") == BOB, WAIT
        )
        assert "Only" in str(refusal.args.get("text")) + str(refusal.args.get("blocks"))
        assert "[✖ Cancel]" in slack.messages[kiwi.ts].visible
        # Carol approves (by her user group): she pushes it into the run.
        await slack.acked(await slack.press(kiwi.ts, action_id(kiwi, "Steer now"), user=CAROL))
        await slack.acked(await slack.press(fig.ts, action_id(fig, "Cancel")))
        await until_shown(slack, root, "✖ cancelled by")
        assert find(slack, root, UNSTEERED) is None, "pressed too late to show anything"
        await until_shown(slack, root, "✔ taken by the agent: “LATER-KIWI please”")
        await until_shown(slack, root, PUSHED)
        await until_shown(slack, root, "✅ done")
        assert "[" not in slack.messages[fig.ts].visible, "buttons left behind"
        assert find(slack, root, UNSTEERED) is None
    [pushed] = [r for r in fake_llm.requests if "LATER-KIWI" in r.last_user_text]
    assert any("slept" in str(m) for m in pushed.messages)  # the same run, after its tool
    assert not [r for r in fake_llm.requests if r.rule == "slowly" and r.step == 1]
    assert not any("SECOND-FIG" in str(m) for r in fake_llm.requests for m in r.messages)

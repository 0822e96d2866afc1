"""Notifications end to end on Slack (fake Slack → bolt → SlackAdapter → Bridge → real pi
agent): a reply in a thread, an edit or a stream append notifies nobody; the two pings
(a question waiting for its person, the end of the run) are new messages mentioning the
person who started the run, as the fake records (`Posted.mentioned`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.model import NotifySettings
from tests.adapters.slack.test_e2e import action_id, slack_bridge, until_shown
from tests.support.agents import extension_path
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


async def test_the_question_and_the_end_are_new_messages_mentioning_the_person(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    gate = str(extension_path(version, "permission-gate.ts"))
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build; echo gone"})]),
        Reply(text="Finished cleaning.\nMore words."),
    )
    notify = NotifySettings(quiet_under=0)
    async with slack_bridge(agent_home, version, tmp_path, "-e", gate, notify=notify) as slack:
        root = (await slack.mention("clean the build"))["payload"]["event"]["ts"]
        dialog = await until_shown(slack, root, "[Yes]")
        assert dialog.mentioned == (ALICE,)
        await slack.acked(await slack.press(dialog.ts, action_id(dialog, "Yes"), user=ALICE))
        ping = await until_shown(slack, root, ": Finished cleaning.")
        assert ping.mentioned == (ALICE,)
        assert ping.thread_ts == root  # in the thread, not a new top-level message
        pinging = [m.ts for m in slack.messages.values() if m.mentioned]
        assert pinging == [dialog.ts, ping.ts]
        assert all(m.thread_ts == root for m in slack.messages.values() if m.ts != root)

"""Plan first end to end (bridge/conversation/plans.py): recording adapter → bridge →
real pi agent with the shipped approval gate → the scripted fake LLM.

The fake model tries to write while it plans; the gate asks the bridge, the bridge
refuses, and the file stays unwritten until a person presses Execute. What the
model was told shows in its next request (the refusal is a tool result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.plans import ASK_REVISION
from bridge.model import ButtonPress, Inbound
from tests.support.bridge_harness import CHAT, KEY, OWNER, STRANGER, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

PLAN = "1. Read the notes\n2. Write pear.txt"
REVISED = "1. Read the notes\n2. Write pear.txt\n3. Write plum.txt"
REFUSED = "Refused: this conversation is planning"
PEAR = ToolCall("write", {"path": "pear.txt", "content": "pear\n"})


def script(llm: FakeLLM) -> None:
    # Planning: the model tries a write first (refused), then writes its plan.
    llm.add("Plan first:", Reply(tool_calls=[PEAR]), Reply(text=PLAN))
    llm.add("asks for changes", Reply(text=REVISED))
    # Executing: the write, then the progress marks the execute prompt asks for.
    llm.add(
        "The plan is approved",
        Reply(tool_calls=[PEAR]),
        Reply(text="Step 1 done\nStep 2 done\nAll written."),
    )


def labels(chat: BridgeHarness, text: str) -> list[str]:
    """The button labels of the newest message showing `text`."""
    for message in reversed(list(chat.adapter.messages.values())):
        if text in message.text:
            return [button.label for row in message.buttons for button in row]
    raise AssertionError(f"no message shows {text!r}")


def plan_options(home: AgentHome, version: str, tmp_path: Path) -> BridgeOptions:
    return options(tmp_path / "data", home.argv(version), home.env())


async def test_a_plan_is_read_only_until_execute_and_ticks_its_steps_as_it_runs(
    containment_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # On every agent the containment must hold on, the newest included.
    script(fake_llm)
    opts = plan_options(agent_home, containment_version, tmp_path)
    pear = opts.workspace(KEY) / "pear.txt"
    async with running_bridge(opts) as chat:
        await chat.say("/plan put a pear in the workspace")
        await chat.button("Execute", contains="Write pear.txt")
        await chat.idle()
        assert not pear.exists()
        assert any(REFUSED in result for result in tool_results(fake_llm))
        shown = await chat.shown("☐ 2. Write pear.txt")
        assert "☐ 1. Read the notes" in shown
        assert labels(chat, "☐ 2. Write pear.txt") == ["▶ Execute", "✏ Revise…", "✖ Cancel"]

        await chat.press("Execute", sender=STRANGER, contains="Write pear.txt")
        await chat.until(lambda: any("Only the person" in a[1] for a in chat.adapter.answers))
        assert not pear.exists()

        await chat.press("Execute", contains="Write pear.txt")
        await chat.until(pear.exists)
        await chat.shown("☑ 2. Write pear.txt")
        await chat.idle()
        done = await chat.shown("the plan's run is over (2 of 2 steps ticked)")
        assert "☑ 1. Read the notes" in done
        assert labels(chat, "☑ 2. Write pear.txt") == []
        stats = chat.bridge.services.stats.plans
        assert dict(stats) == {"started": 1, "refused": 1, "executed": 1}
    assert pear.read_text() == "pear\n"


async def test_revise_plans_again_and_cancel_ends_the_plan(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm)
    opts = plan_options(agent_home, version, tmp_path)
    async with running_bridge(opts) as chat:
        await chat.say("/plan put a pear in the workspace")
        first = await chat.button("Execute", contains="Write pear.txt")
        await chat.idle()
        await chat.press("Revise…", contains="Write pear.txt")
        await chat.shown(ASK_REVISION)
        await chat.say("add a plum too")
        await chat.button("Execute", contains="Write plum.txt")
        await chat.idle()
        assert "add a plum too" in fake_llm.requests[-1].last_user_text
        await chat.press("Cancel", contains="Write plum.txt")
        await chat.shown("cancelled it")
        conversation = chat.bridge.supervisor.conversations[KEY]
        assert conversation.record is not None
        assert conversation.record.plan is None
        # The first plan's Execute is long dead; the file is never written.
        press = ButtonPress(first.token, "late-press")
        await chat.bridge.handle(Inbound(KEY, CHAT, OWNER, "late", press=press))
        await chat.until(lambda: any("no longer active" in a[1] for a in chat.adapter.answers))
        assert not (opts.workspace(KEY) / "pear.txt").exists()
        assert not (opts.workspace(KEY) / "plum.txt").exists()
        stats = chat.bridge.services.stats.plans
        assert dict(stats) == {"started": 1, "refused": 1, "revised": 1, "cancelled": 1}


async def test_plan_cancel_while_the_agent_plans_stops_the_run_and_shows_no_plan(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    slow = "1. Read the notes slowly and carefully, word by word\n2. Write pear.txt"
    fake_llm.add("Plan first:", Reply(text=slow, delay=0.4))
    opts = plan_options(agent_home, version, tmp_path)
    async with running_bridge(opts) as chat:
        await chat.say("/plan put a pear in the workspace")
        await chat.until(chat.conversation_busy)
        await chat.say("/plan cancel")
        await chat.shown("✖ Plan cancelled")
        await chat.shown("stopped")  # the run that was planning, not left to run on
        await chat.idle()
        conversation = chat.bridge.supervisor.conversations[KEY]
        assert conversation.record is not None
        assert conversation.record.plan is None
        await chat.bridge.outbox.flush()
        assert chat.find("📝 *Plan*") is None, chat.all_text()
        assert chat._button("Execute", "") is None


async def test_a_plans_buttons_outlive_a_bridge_restart(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm)
    opts = plan_options(agent_home, version, tmp_path)
    pear = opts.workspace(KEY) / "pear.txt"
    async with running_bridge(opts) as chat:
        await chat.say("/plan put a pear in the workspace")
        execute = await chat.button("Execute", contains="Write pear.txt")
        await chat.idle()
    async with running_bridge(opts) as chat:  # the same data dir: the same store
        press = ButtonPress(execute.token, "after-restart")
        await chat.bridge.handle(Inbound(KEY, CHAT, OWNER, "again", press=press))
        await chat.until(pear.exists)
        await chat.idle()
        await chat.shown("the plan's run is over (2 of 2 steps ticked)")
        stored = await chat.bridge.services.store.get_conversation(KEY)
        assert stored is not None
        assert stored.plan is None

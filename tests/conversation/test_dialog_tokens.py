"""A button press acts only on its own conversation's dialogs.

Telegram clients can send any callback data, so a press may carry a token that
belongs to another conversation's open question. It must be told "no longer
active" and change nothing there: that question's owner can still answer it, and
when nobody does, the bridge's own deadline still cancels it, so the agent never
waits for the run-time limit. Real agent (pi's permission-gate example: a select
dialog without a timeout of its own) against the scripted fake LLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.model import ButtonPress, ChatRef, Inbound
from tests.support.agents import DEFAULT_VERSION, extension_path
from tests.support.bridge_harness import KEY, OWNER, STRANGER, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

OTHER_KEY, OTHER_CHAT = "test:2", ChatRef("2")
COMMAND = "rm -rf build && echo removed"


def gated_options(agent_home: AgentHome, tmp_path: Path, **kw: object) -> BridgeOptions:
    from tests.conftest import require_agent

    require_agent(DEFAULT_VERSION)
    gate = str(extension_path(DEFAULT_VERSION, "permission-gate.ts"))
    return options(
        tmp_path / "data", agent_home.argv(DEFAULT_VERSION, "-e", gate), agent_home.env(), **kw
    )


def script_clean(fake_llm: FakeLLM) -> None:
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": COMMAND})]),
        Reply(text="Finished cleaning."),
    )


async def press_from_another_conversation(chat: BridgeHarness, token: str) -> None:
    """What a modified client sends: the token of the dialog in KEY, pressed in OTHER_KEY."""
    press = ButtonPress(token, "forged-press")
    await chat.bridge.handle(Inbound(OTHER_KEY, OTHER_CHAT, STRANGER, "forged", press=press))
    await chat.until(lambda: any(a[0] == "forged-press" for a in chat.adapter.answers))
    (answer,) = [a for a in chat.adapter.answers if a[0] == "forged-press"]
    assert "no longer active" in answer[1]


async def test_a_press_with_another_conversations_token_changes_nothing_there(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = gated_options(agent_home, tmp_path)
    script_clean(fake_llm)
    async with running_bridge(opts) as chat:
        target = opts.workspace(KEY) / "build"
        target.mkdir(parents=True)
        await chat.say("clean the build")
        yes = await chat.button("Yes", contains="rm -rf build")
        await press_from_another_conversation(chat, yes.token)
        # The question in its own conversation is untouched: its owner answers it.
        await chat.press("Yes", sender=OWNER, contains="rm -rf build")
        await chat.until(lambda: len(chat.adapter.answers) == 2)
        assert chat.adapter.answers[1][1] == "✓ Yes"
        await chat.shown("Finished cleaning.")
        assert chat.find("chose: Yes") is not None
        assert not target.exists()


async def test_an_unanswered_dialog_is_cancelled_at_the_bridges_deadline_after_a_forged_press(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = gated_options(agent_home, tmp_path, dialog_timeout=2.0)
    script_clean(fake_llm)
    async with running_bridge(opts) as chat:
        target = opts.workspace(KEY) / "build"
        target.mkdir(parents=True)
        await chat.say("clean the build")
        no = await chat.button("No", contains="rm -rf build")
        await press_from_another_conversation(chat, no.token)
        # Nobody answers: the bridge's deadline cancels the question, the agent goes on.
        await chat.shown("cancelled", within=10)
        await chat.shown("Finished cleaning.", within=10)
        await chat.idle()
        assert target.exists()
        assert any("Blocked by user" in str(r.messages) for r in fake_llm.requests)


async def test_a_dialog_whose_claim_left_the_store_is_still_cancelled_at_the_deadline(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = gated_options(agent_home, tmp_path, dialog_timeout=2.0)
    script_clean(fake_llm)
    async with running_bridge(opts) as chat:
        await chat.say("clean the build")
        await chat.button("No", contains="rm -rf build")
        # However the claim went (a bug, an operator, another replica), the agent waits.
        (claim, *_) = await chat.bridge.store.dialogs_for(KEY)
        assert await chat.bridge.store.take_dialog(claim.request_id, KEY)
        await chat.shown("cancelled", within=10)
        await chat.shown("Finished cleaning.", within=10)
        assert any("Blocked by user" in str(r.messages) for r in fake_llm.requests)

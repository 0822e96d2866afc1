"""The whole bridge end to end: recording adapter → router → supervisor → real pi agent
(against the scripted fake LLM) → renderer → outbox → recording adapter.

Each test is a user journey from docs/design.md; assertions are on what the chat shows
and what the model was sent, never on which internal function ran.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import TYPE_CHECKING

import pytest

from bridge.model import ButtonPress, Inbound
from bridge.rpc.env import agent_environment
from tests.support.agents import extension_path
from tests.support.bridge_harness import CHAT, KEY, OWNER, STRANGER, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import STEERED, UNSTEERED, requests_with, script_steerable_run
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from bridge.options import BridgeOptions
    from bridge.rpc.client import AgentClient
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

TIMED_GATE = EXTENSIONS / "timed-gate.ts"


SUMMARY = "The user asked to remember KIWI and the agent noted it; nothing else is pending."


def bridge_options(
    home: AgentHome, version: str, tmp_path: Path, *extra: str, **kw: object
) -> BridgeOptions:
    return options(tmp_path / "data", home.argv(version, *extra), home.env(), **kw)


async def test_a_message_while_busy_steers_the_same_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_steerable_run(fake_llm)
    async with running_bridge(bridge_options(agent_home, version, tmp_path)) as chat:
        await chat.say("do it slowly")
        await chat.shown("🔧 bash")
        await chat.say("STEER-PURPLE instead")
        await chat.shown(STEERED)
        await chat.idle()
        assert requests_with(fake_llm, "STEER-PURPLE") == 1
        assert chat.all_text().count("✅ done") == 1, chat.all_text()
        assert UNSTEERED not in chat.all_text()


@pytest.mark.parametrize(
    ("choice", "outcome"), [("Steer now", "➡️ sent now"), ("After this run", "⏭ after this run")]
)
async def test_asked_while_busy_the_users_choice_sends_the_message_into_the_run(
    choice: str, outcome: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    from bridge.options import ChatOptions
    from tests.conftest import require_agent
    from tests.support.agents import DEFAULT_VERSION

    require_agent(DEFAULT_VERSION)
    fake_llm.add(
        "slowly",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 4; echo slept"})]),
        Reply(text=UNSTEERED),
    )
    fake_llm.add("PURPLE", Reply(text="Purple it is."))
    chats = {KEY: ChatOptions(busy_policy="ask")}
    opts = bridge_options(agent_home, DEFAULT_VERSION, tmp_path, chats=chats)
    async with running_bridge(opts) as chat:
        await chat.say("do it slowly")
        await chat.shown("🔧 bash")
        await chat.say("PURPLE instead")
        await chat.press(choice, contains="The agent is busy")
        await chat.shown(outcome)
        await chat.shown("Purple it is.")
        await chat.idle()
        assert requests_with(fake_llm, "PURPLE") == 1
        # A steer joins the run. 0.73.1 could not give a follow-up back, so the bridge
        # holds it until the run ends, and it starts the next one (bridge/conversation/pending.py).
        runs = 1 if choice == "Steer now" else 2
        assert chat.all_text().count("✅ done") == runs, chat.all_text()
        # The message waited for the choice, then reached the run and ended with it.
        marks = chat.adapter.reactions
        (asked, purple) = dict.fromkeys(m for m, _ in marks)
        assert marks == [
            (asked, "working"),
            (purple, "working"),
            (asked, "done"),
            *([(purple, "working")] if runs == 2 else []),  # its own run starts
            (purple, "done"),
        ]


@pytest.fixture
def compacting(agent_home: AgentHome, fake_llm: FakeLLM) -> str:
    """The agent version, set to compact after every run (any context over ~100 tokens,
    keeping almost nothing), slowly: its summary streams for a few seconds. 0.73.1
    compacts right after the run that crossed the threshold (0.87.1 waits for the next
    prompt, which then carries it out first: nothing to hold there)."""
    from tests.conftest import require_agent
    from tests.support.agents import DEFAULT_VERSION

    require_agent(DEFAULT_VERSION)
    settings_file = agent_home.agent_dir / "settings.json"
    settings = json.loads(settings_file.read_text("utf-8"))
    settings["compaction"] = {"enabled": True, "reserveTokens": 127_900, "keepRecentTokens": 10}
    settings_file.write_text(json.dumps(settings), "utf-8")
    # Added first, so the summary request (which quotes the conversation) matches it.
    fake_llm.add("context checkpoint summary", Reply(text=SUMMARY, delay=0.3))
    fake_llm.add("remember KIWI", Reply(text="Noted KIWI."))
    return DEFAULT_VERSION


async def held_during_compaction(chat: BridgeHarness) -> AgentClient:
    """A run, the compaction after it, and "PURPLE now" sent meanwhile and held."""
    await chat.say("remember KIWI")
    await chat.shown("Noted KIWI.")
    agent = chat.bridge.supervisor.conversations[KEY].agent
    assert agent is not None
    await chat.until(lambda: agent.state.compacting)
    await chat.say("PURPLE now")
    await chat.shown("compacting its context; your message goes in when it is done")
    return agent


async def test_a_message_sent_during_an_auto_compaction_is_held_then_goes_in(
    compacting: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("PURPLE", Reply(text="Purple it is."))
    async with running_bridge(bridge_options(agent_home, compacting, tmp_path)) as chat:
        await held_during_compaction(chat)
        await chat.shown("Purple it is.")
        await chat.idle()
    asked = [r.last_user_text for r in fake_llm.requests]
    summary = next(i for i, text in enumerate(asked) if "checkpoint summary" in text)
    purple = next(i for i, text in enumerate(asked) if "PURPLE now" in text)
    assert summary < purple, "the held message went in before the compaction ended"
    (held,) = [m for m, state in chat.adapter.reactions if state == "working"][1:]
    assert (held, "done") in chat.adapter.reactions


async def test_a_message_held_for_a_compaction_the_agent_dies_in_is_reported_not_sent(
    compacting: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("what fruit", Reply(text="It was KIWI."))
    async with running_bridge(bridge_options(agent_home, compacting, tmp_path)) as chat:
        agent = await held_during_compaction(chat)
        os.killpg(agent.pid, signal.SIGKILL)
        await chat.shown("The agent stopped")
        await chat.shown("Not sent, please send again: “PURPLE now”")
        await chat.say("what fruit did I say?")
        await chat.shown("It was KIWI.")
        await chat.idle()
    assert requests_with(fake_llm, "PURPLE") == 0


async def test_after_a_stop_each_message_sent_during_the_run_is_answered_or_named_unsent(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # What pi does with queued messages on abort depends on timing: a steer may be
    # taken into its context first, dropped, or kept for the next run; follow-ups are
    # kept. Whichever happened, after the next run nothing may be lost silently or stay
    # marked as in the works.
    fake_llm.add("long answer", Reply(text="word " * 300, delay=0.1))
    fake_llm.add("LATER-GREEN", Reply(text="Green, as promised."))
    fake_llm.add("STEER-RED", Reply(text="Red."))
    fake_llm.add("next thing", Reply(text="Next thing done."))
    async with running_bridge(bridge_options(agent_home, version, tmp_path)) as chat:
        await chat.say("a long answer please")
        await chat.shown("word word word")
        await chat.say(">> LATER-GREEN please")
        await chat.say("STEER-RED please")
        marks = chat.adapter.reactions
        await chat.until(lambda: [s for _, s in marks].count("working") == 3)
        (_, later, steer) = [m for m, state in marks if state == "working"]
        await chat.say("/stop")
        await chat.until(lambda: chat.find("⏹ stopped") is not None)
        await chat.idle()
        await chat.say("next thing")
        # Its run answers whatever pi put last into it (the steer or follow-up it kept).
        await chat.shown("✅ done")
        await chat.idle()
        await chat.until(lambda: all(final(marks, m) != "working" for m in (later, steer)))
    history = " ".join(str(r.messages) for r in fake_llm.requests)
    for message, text in ((steer, "STEER-RED please"), (later, "LATER-GREEN please")):
        if text in history:
            assert final(marks, message) == "done", (text, marks)
            assert f"Not delivered to the agent: “{text}”" not in chat.all_text()
        else:
            assert final(marks, message) == "failed", (text, marks)
            assert chat.find(f"Not delivered to the agent: “{text}”") is not None


def final(marks: Sequence[tuple[str, str]], message: str) -> str:
    return [state for m, state in marks if m == message][-1]


async def test_a_double_chevron_message_is_a_follow_up_after_the_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "first task",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 1.5; echo ok"})]),
        Reply(text="First task finished."),
    )
    fake_llm.add("SECOND-TASK", Reply(text="Second task finished."))
    async with running_bridge(bridge_options(agent_home, version, tmp_path)) as chat:
        await chat.say("first task please")
        await chat.shown("🔧 bash")
        await chat.say(">> SECOND-TASK now")
        await chat.shown("Second task finished.")
        await chat.idle()
        text = chat.all_text()
        assert text.index("First task finished.") < text.index("Second task finished.")
        first = next(r for r in fake_llm.requests if "SECOND-TASK" in r.last_user_text)
        assert any("First task finished." in str(m) for m in first.messages)


@pytest.mark.parametrize(("answer", "ran"), [("Yes", True), ("No", False)])
async def test_a_dangerous_command_waits_for_the_owners_button(
    version: str, answer: str, ran: bool, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    gate = str(extension_path(version, "permission-gate.ts"))
    opts = bridge_options(agent_home, version, tmp_path, "-e", gate)
    target = opts.workspace(KEY) / "build"
    target.mkdir(parents=True)
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build && echo removed"})]),
        Reply(text="Finished cleaning."),
    )
    async with running_bridge(opts) as chat:
        await chat.say("clean the build")
        await chat.button("Yes", contains="rm -rf build")
        await chat.press(answer, sender=STRANGER, contains="rm -rf build")
        await chat.until(lambda: any("Only" in a[1] for a in chat.adapter.answers))
        assert target.exists(), "a stranger's press ran the command"
        await chat.press(answer, sender=OWNER, contains="rm -rf build")
        await chat.shown("Finished cleaning.")
        await chat.idle()
        assert target.exists() is not ran
        assert chat.find(f"chose: {answer}") is not None
        audit = await chat.bridge.store.audit_log(KEY)
        assert [(e.user_id, e.choice) for e in audit] == [(OWNER.id, answer)]


async def test_a_dialog_with_a_timeout_retires_its_buttons_when_it_expires(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = bridge_options(agent_home, version, tmp_path, "-e", str(TIMED_GATE))
    fake_llm.add(
        "deploy",
        Reply(tool_calls=[ToolCall("bash", {"command": "echo timed deploy"})]),
        Reply(text="Deploy step over."),
    )
    async with running_bridge(opts) as chat:
        await chat.say("deploy it")
        button = await chat.button("Run", contains="timed deploy")
        opened = time.monotonic()
        await chat.until(lambda: chat.find("expired") is not None, within=10)
        retired_after = time.monotonic() - opened
        assert 1.0 < retired_after < 3.5
        assert all(
            button.token not in [b.token for row in m.buttons for b in row]
            for m in chat.adapter.messages.values()
        )
        await chat.shown("Deploy step over.")
        # A late press on the retired button is told it is no longer active.
        await chat.bridge.handle(
            Inbound(KEY, CHAT, OWNER, "late", press=ButtonPress(button.token, "late-press"))
        )
        await chat.until(lambda: any("no longer active" in a[1] for a in chat.adapter.answers))


async def test_stop_with_a_dialog_pending_ends_the_run_in_under_a_second(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    gate = str(extension_path(version, "permission-gate.ts"))
    fake_llm.add(
        "wipe",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /tmp/nothing-here"})]),
        Reply(text="Should not get here."),
    )
    async with running_bridge(bridge_options(agent_home, version, tmp_path, "-e", gate)) as chat:
        await chat.say("wipe it")
        await chat.button("Yes", contains="rm -rf")
        started = time.monotonic()
        await chat.say("/stop")
        await chat.until(lambda: not chat.conversation_busy(), within=5)
        assert time.monotonic() - started < 1.0
        await chat.shown("stopped")


async def test_a_killed_agent_is_reported_and_the_next_message_resumes_its_session(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("remember", Reply(text="I will remember MANGO."))
    fake_llm.add(
        "long job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 30"})]),
        Reply(text="never"),
    )
    fake_llm.add("what fruit", Reply(text="You said MANGO."))
    async with running_bridge(bridge_options(agent_home, version, tmp_path)) as chat:
        await chat.say("remember MANGO")
        await chat.shown("I will remember MANGO.")
        await chat.idle()
        await chat.say("start the long job")
        await chat.shown("🔧 bash")
        conversation = chat.bridge.supervisor.conversations[KEY]
        assert conversation.agent is not None
        os.killpg(conversation.agent.pid, signal.SIGKILL)
        await chat.shown("The agent stopped (exit -9)")
        await chat.say("what fruit did I say?")
        await chat.shown("You said MANGO.")
        resumed = next(r for r in fake_llm.requests if "what fruit" in r.last_user_text)
        assert any("remember MANGO" in str(m) for m in resumed.messages)


async def test_a_restarted_bridge_resumes_the_conversation_from_the_store(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("remember", Reply(text="Noted: KIWI."))
    fake_llm.add("what fruit", Reply(text="It was KIWI."))
    opts = bridge_options(agent_home, version, tmp_path)
    async with running_bridge(opts) as chat:
        await chat.say("remember KIWI")
        await chat.shown("Noted: KIWI.")
        await chat.idle()
    async with running_bridge(opts) as chat:
        await chat.say("what fruit was it?")
        await chat.shown("It was KIWI.")
    resumed = next(r for r in fake_llm.requests if "what fruit" in r.last_user_text)
    assert any("remember KIWI" in str(m) for m in resumed.messages)


async def test_the_bridges_secrets_never_reach_the_agents_shell(
    version: str,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = {
        "TELEGRAM_BOT_TOKEN": "tg-secret-111",
        "SLACK_BOT_TOKEN": "xoxb-secret-222",
        "SLACK_SIGNING_SECRET": "sign-secret-333",
        "PI_BRIDGE_STORE": "redis://:pw-secret-444@127.0.0.1:1/0",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    # The bridge builds the agent's environment from its own, as in production.
    env = agent_environment(os.environ, ["PI_CODING_AGENT_DIR"], overrides=agent_home.env())
    fake_llm.add(
        "environment",
        Reply(tool_calls=[ToolCall("bash", {"command": "env; echo END-OF-ENV"})]),
        Reply(text="Listed."),
    )
    opts = options(tmp_path / "data", agent_home.argv(version), env)
    async with running_bridge(opts) as chat:
        await chat.say("show the environment")
        await chat.shown("Listed.")
        await chat.idle()
    tool_result = next(r for r in fake_llm.requests if "END-OF-ENV" in str(r.messages))
    dumped = str(tool_result.messages)
    assert "PATH=" in dumped
    for value in secrets.values():
        assert value not in dumped


async def test_chat_overrides_set_the_workspace_agent_approvers_and_policy(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    from bridge.options import ChatOptions
    from tests.conftest import require_agent
    from tests.support.agents import DEFAULT_VERSION

    require_agent(DEFAULT_VERSION)
    gate = str(extension_path(DEFAULT_VERSION, "permission-gate.ts"))
    checkout = tmp_path / "checkout"
    (checkout / "build").mkdir(parents=True)
    # Only this conversation's agent has the gate; the default one would just run rm.
    chat_options = ChatOptions(
        workspace=checkout,
        argv=tuple(agent_home.argv(DEFAULT_VERSION, "-e", gate)),
        approvers=frozenset({STRANGER.id}),
        busy_policy="ask",
    )
    opts = bridge_options(agent_home, DEFAULT_VERSION, tmp_path, chats={KEY: chat_options})
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build && echo removed"})]),
        Reply(text="Finished cleaning."),
    )
    async with running_bridge(opts) as chat:
        await chat.say("clean the build")
        await chat.button("Yes", contains="rm -rf build")
        await chat.say("and the cache too")
        await chat.shown("The agent is busy")  # busy_policy "ask" from the override
        await chat.press("Yes", sender=STRANGER, contains="rm -rf build")  # a chat approver
        await chat.shown("Finished cleaning.")
        await chat.idle()
        assert not (checkout / "build").exists()
        assert not opts.data_dir.joinpath("workspaces").exists()
        assert chat.find(f"{STRANGER.name} chose: Yes") is not None

"""The approval gate end to end on Telegram: fake Bot API → real python-telegram-bot →
`Bridge` → real pi agent with the shipped gate (`[approvals] mode`) → the fake LLM.

What the person sees (the question, its context, who decided) is read from the fake's
messages; what the agent did is read from the fake LLM's requests (a blocked call's
reason is the tool result the model gets).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

import pytest

from bridge.conversation.approval_questions import GRANTED
from bridge.options import ApprovalOptions
from bridge.store import open_store
from tests.adapters.telegram.test_e2e import CHAT, WAIT, telegram_bot
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import FakeTelegram
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import ApprovalMode, BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

BOB_ID = 77  # approves
BOB = {"id": BOB_ID, "is_bot": False, "first_name": "Bob", "username": "bob"}
ASKED = "Approve this"


def gated(
    home: AgentHome, version: str, tmp_path: Path, mode: ApprovalMode, **more: Any
) -> BridgeOptions:
    return options(
        tmp_path / "data",
        home.argv(version),
        home.env(),
        approvals=ApprovalOptions(mode=mode, **more.pop("gate", {})),
        **more,
    )


def asked(fake: FakeTelegram, chat: int = CHAT) -> list[Message]:
    return [m for m in fake.bot_messages(chat) if ASKED in m.text]


def button(message: Message, label: str) -> str:
    [data] = [d for text, d in message.buttons if label in text]
    return data


async def test_always_allow_outlives_a_restart_until_grants_revokes_it(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    for n in range(1, 5):
        fake_llm.add(
            f"clean-{n}",
            Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build  && echo gone"})]),
            Reply(text=f"Cleaned {n}."),
        )
    opts = gated(agent_home, version, tmp_path, "dangerous")
    (opts.workspace(f"tg:{CHAT}") / "build").mkdir(parents=True)
    workspace = opts.workspace(f"tg:{CHAT}")
    async with FakeTelegram(enforce_limits=True) as fake:
        async with telegram_bot(opts, on=fake):
            fake.message(CHAT, "clean-1 please")
            question = await fake.bot_message(ASKED, CHAT, within=WAIT)
            assert "rm -rf build" in question.text
            assert "matches" in question.text  # why it asks
            assert str(workspace) in question.text  # where it would run
            assert (workspace / "build").exists()  # not run yet
            fake.press(CHAT, question.message_id, button(question, "Always allow"))
            await fake.bot_message("Cleaned 1.", CHAT, within=WAIT)
            await fake.bot_message("chose: Always allow", CHAT, within=WAIT)
            assert not (workspace / "build").exists()
            fake.message(CHAT, "clean-2 please")  # the same command: no question
            await fake.bot_message("Cleaned 2.", CHAT, within=WAIT)
            assert len(asked(fake)) == 1
        async with telegram_bot(opts, on=fake):  # a bridge restart keeps the grant
            fake.message(CHAT, "clean-3 please")
            await fake.bot_message("Cleaned 3.", CHAT, within=WAIT)
            assert len(asked(fake)) == 1
            fake.message(CHAT, "/grants")
            listing = await fake.bot_message("Allowed without asking", CHAT, within=WAIT)
            assert "rm -rf build" in listing.text
            fake.press(CHAT, listing.message_id, listing.buttons[0][1])
            await fake.bot_message("asks for approval again", CHAT, within=WAIT)
            fake.message(CHAT, "clean-4 please")
            await fake.wait_for(lambda: len(asked(fake)) == 2, WAIT)
            again = asked(fake)[-1]
            fake.press(CHAT, again.message_id, button(again, "⛔ Deny"))
            await fake.bot_message("Cleaned 4.", CHAT, within=WAIT)
    assert any("Denied by the person approving" in r for r in tool_results(fake_llm))
    store = await open_store("sqlite", opts.data_dir)
    try:
        log = await store.audit_log(f"tg:{CHAT}")
    finally:
        await store.aclose()
    decided = [(e.user_id, e.title, e.choice) for e in reversed(log)]
    command = "bash: rm -rf build && echo gone"
    assert decided == [
        ("42", command, "Always allow"),
        ("42", command, GRANTED),  # clean-2
        ("42", command, GRANTED),  # clean-3, after the restart
        ("42", command, "Deny"),
    ]


async def test_deny_with_reason_gives_the_agent_the_reason(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "drop the db",
        Reply(tool_calls=[ToolCall("bash", {"command": "sudo rm -r /var/lib/db"})]),
        Reply(text="Understood, not dropping it."),
    )
    async with telegram_bot(gated(agent_home, version, tmp_path, "dangerous")) as fake:
        fake.message(CHAT, "drop the db")
        question = await fake.bot_message(ASKED, CHAT, within=WAIT)
        fake.press(CHAT, question.message_id, button(question, "Deny with reason"))
        # Telegram has no forms: the gate asks for the reason as a question of its own.
        why = await fake.bot_message("Why not?", CHAT, within=WAIT)
        fake.press(CHAT, why.message_id, button(why, "Answer"))
        prompt = await fake.bot_message("Reply to this message", CHAT, within=WAIT)
        fake.message(CHAT, "use the migration instead", reply_to=prompt.message_id)
        await fake.bot_message("Understood, not dropping it.", CHAT, within=WAIT)
    results = tool_results(fake_llm)
    assert any("use the migration instead" in r for r in results), results


async def test_an_edit_in_writes_mode_shows_the_diff_it_then_makes(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = gated(agent_home, version, tmp_path, "writes")
    notes = opts.workspace(f"tg:{CHAT}") / "notes.txt"
    notes.parent.mkdir(parents=True)
    before = "".join(f"line {n}\n" for n in range(1, 12))
    notes.write_text(before)
    fake_llm.add(
        "fix the notes",
        Reply(
            tool_calls=[
                ToolCall("edit", {"path": "notes.txt", "oldText": "line 6\n", "newText": "six\n"})
            ]
        ),
        Reply(text="Notes fixed."),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "fix the notes")
        question = await fake.bot_message(ASKED, CHAT, within=WAIT)
        fake.press(CHAT, question.message_id, button(question, "Allow once"))
        await fake.bot_message("Notes fixed.", CHAT, within=WAIT)
    after = notes.read_text()
    assert after != before
    real = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    shown = [line for line in question.text.splitlines() if line in real]
    assert real == ["-line 6", "+six"]
    assert shown == real


async def test_an_approver_answers_from_a_direct_message_and_the_chat_shows_it(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "push it",
        Reply(tool_calls=[ToolCall("bash", {"command": "git push --force origin main || true"})]),
        Reply(text="Pushed."),
    )
    opts = gated(
        agent_home,
        version,
        tmp_path,
        "dangerous",
        gate={"notify_approvers": "dm"},
        approvers=frozenset({str(BOB_ID)}),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "push it")
        here = await fake.bot_message(ASKED, CHAT, within=WAIT)
        deny = button(here, "⛔ Deny")  # kept for a press after the answer
        there = await fake.bot_message(ASKED, BOB_ID, within=WAIT)
        assert "git push --force" in there.text
        assert there.buttons
        assert here.notified  # the question pings Alice, who started the run
        assert there.notified  # and its copy the approver, in their own chat
        fake.press(BOB_ID, there.message_id, button(there, "Allow once"), user=BOB)
        await fake.bot_message("Pushed.", CHAT, within=WAIT)
        await fake.wait_for(
            lambda: "Bob chose: Allow once" in fake.messages[CHAT, here.message_id].text
        )
        await fake.wait_for(
            lambda: "Bob chose: Allow once" in fake.messages[BOB_ID, there.message_id].text
        )
        assert not fake.messages[CHAT, here.message_id].buttons
        assert not fake.messages[BOB_ID, there.message_id].buttons
        # A late press on the answered copy says so and counts for nothing.
        late = fake.press(CHAT, here.message_id, deny)
        await fake.wait_for(lambda: late in fake.answers)
        assert "no longer active" in fake.answers[late][0]
    results = tool_results(fake_llm)
    assert results
    assert not any("Denied" in r or "Not approved" in r for r in results), results


async def test_a_press_after_the_question_expired_changes_nothing(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "reboot it",
        Reply(tool_calls=[ToolCall("bash", {"command": "sudo reboot"})]),
        Reply(text="Left it running."),
    )
    opts = gated(agent_home, version, tmp_path, "dangerous", dialog_timeout=4.0)
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "reboot it")
        question = await fake.bot_message(ASKED, CHAT, within=WAIT)
        allow = button(question, "Allow once")
        await fake.bot_message("Left it running.", CHAT, within=WAIT)
        # While it waited, the live status said so (not "working").
        shown = [str(c.params.get("text")) for c in fake.calls_of("editMessageText")]
        assert any("waiting for approval" in text for text in shown), shown
        late = fake.press(CHAT, question.message_id, allow)
        await fake.wait_for(lambda: late in fake.answers)
        assert "no longer active" in fake.answers[late][0]
    results = tool_results(fake_llm)
    assert any("Not approved" in r for r in results), results

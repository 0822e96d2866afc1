"""Telegram drafts end to end: a private answer streams as a draft (sendMessageDraft) and
lands as one message; groups, and chats that refuse drafts, post and edit instead.

Fake Bot API → real python-telegram-bot → `serve` → real `Bridge` → real pi agent
against the scripted fake LLM. The fake keeps each chat's drafts (`draft_texts`) apart
from its messages, and refuses drafts in groups as Telegram does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.adapters.telegram.test_e2e import CHAT, FORUM, TOPIC, WAIT, edits_of, telegram_bot
from tests.conftest import require_agent
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import ASK_ANSWER, agent_got

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import FakeTelegram

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

# Long enough, at one word per 0.25 s, to stream for several seconds past the chat's pace.
ANSWER = (
    "Both files are clean now: the first had a stray import and the second a missing "
    "newline at its end, both fixed, and the build passes with every check green today."
)


def answers_in(fake: FakeTelegram, chat: int, text: str) -> list[str]:
    """The bot's messages in `chat` that hold `text` (an answer sent twice shows twice)."""
    return [m.text for m in fake.bot_messages(chat) if text in m.text]


def two_tools_then(answer: str) -> list[Reply]:
    return [
        Reply(
            text="Checking both files.",
            tool_calls=[
                ToolCall("bash", {"command": "echo first-file-ok"}),
                ToolCall("bash", {"command": "echo second-file-ok"}),
            ],
        ),
        Reply(text=answer, delay=0.25),
    ]


async def test_a_private_answer_streams_as_a_draft_and_lands_as_one_message(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("check both", *two_tools_then(ANSWER))
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "check both files")
        message = await fake.bot_message("every check green today.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
    drafts = fake.draft_texts.get(CHAT, [])
    assert any(ANSWER.startswith(d.strip()) and d.strip() != ANSWER for d in drafts), drafts
    assert message.text.strip() == ANSWER
    assert answers_in(fake, CHAT, "every check green") == [message.text]
    assert edits_of(fake, message.message_id) == []  # the answer was never edited
    tools = [m for m in fake.bot_messages(CHAT) if "file-ok" in m.text and "✅" in m.text]
    assert len(tools) == 2  # tool messages post and edit as before
    assert not [e for e in fake.errors if "Too Many Requests" in e[1]], fake.errors


async def test_a_chat_that_refuses_drafts_gets_the_answer_by_editing_and_only_once(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("check both", *two_tools_then(ANSWER))
    async with telegram_bot(opts, refuse_drafts=True) as fake:
        fake.message(CHAT, "check both files")
        message = await fake.bot_message("every check green today.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        refused = len(fake.calls_of("sendMessageDraft"))
    assert message.text.strip() == ANSWER
    assert answers_in(fake, CHAT, "every check green") == [message.text]
    assert answers_in(fake, CHAT, "Checking both files.") != []
    assert refused == 1  # asked once; the chat posts and edits from then on
    assert fake.draft_texts.get(CHAT) is None


async def test_a_forum_topic_posts_and_edits_without_asking_for_drafts(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("topic question", Reply(text="Answered in the topic, at length.", delay=0.2))
    async with telegram_bot(opts) as fake:
        fake.message(FORUM, "@pi_test_bot a topic question", thread_id=TOPIC)
        answer = await fake.bot_message("at length.", FORUM, within=WAIT)
        await fake.bot_message("✅ done", FORUM, within=WAIT)
    assert answer.thread_id == TOPIC
    assert fake.calls_of("sendMessageDraft") == []


async def test_a_dialog_after_a_drafted_text_still_shows_its_buttons_and_is_answered(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(DEFAULT_VERSION)
    argv = agent_home.argv(DEFAULT_VERSION, "-e", str(ASK_ANSWER))
    opts = options(tmp_path / "data", argv, agent_home.env())
    fake_llm.add(
        "branch",
        Reply(
            text="Let me ask you for the branch first.",
            tool_calls=[ToolCall("bash", {"command": "echo ask-input"})],
            delay=0.2,
        ),
        Reply(text="Noted the branch."),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "pick a branch")
        dialog = await fake.bot_message("Branch name?", CHAT, within=WAIT)
        [(_, cancel)] = [b for b in dialog.buttons if "Cancel" in b[0]]
        fake.press(CHAT, dialog.message_id, cancel)
        await fake.bot_message("Noted the branch.", CHAT, within=WAIT)
    assert agent_got(fake_llm, "<cancelled>")
    assert fake.draft_texts.get(CHAT), "the text before the dialog was not drafted"
    assert answers_in(fake, CHAT, "Let me ask you for the branch first.") != []

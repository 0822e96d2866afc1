"""The fake Bot API's sendMessageDraft, driven by the real python-telegram-bot: what a
private chat shows while a bot streams, how long it shows it, and what Telegram refuses
(core.telegram.org/bots/api#sendmessagedraft). The bridge's fallbacks are tested against
these refusals, so each one must really be refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from telegram import Bot, MessageEntity
from telegram.error import BadRequest, RetryAfter

from tests.support.fake_telegram import (
    DRAFT_BURST,
    DRAFT_LIFE,
    MAX_TEXT,
    TOKEN,
    FakeTelegram,
)
from tests.support.recording_adapter import FakeClock

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

CHAT = 42  # a private chat (the fake's positive ids)
OTHER = 43
GROUP = -100777


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
async def fake(clock: FakeClock) -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(clock=clock) as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url) as real:
        yield real


async def test_python_telegram_bot_has_send_message_draft() -> None:
    assert callable(Bot.send_message_draft)


async def test_a_draft_shows_its_text_in_the_private_chat(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.send_message_draft(CHAT, 7, "*Hel*lo\\!", parse_mode="MarkdownV2") is True
    draft = fake.shown_draft(CHAT)
    assert draft is not None
    assert (draft.draft_id, draft.text) == (7, "Hello!")
    assert fake.calls_of("sendMessageDraft")[-1].params["draft_id"] == 7


async def test_each_update_of_a_draft_replaces_the_text_and_is_kept_in_the_history(
    fake: FakeTelegram, bot: Bot
) -> None:
    for text in ("He", "Hello", "Hello, Alice"):
        await bot.send_message_draft(CHAT, 7, text)
    draft = fake.shown_draft(CHAT)
    assert draft is not None
    assert draft.text == "Hello, Alice"
    assert fake.draft_texts[CHAT] == ["He", "Hello", "Hello, Alice"]


@pytest.mark.parametrize("text", [None, ""], ids=["no text", "empty text"])
async def test_a_draft_without_text_is_the_thinking_placeholder(
    fake: FakeTelegram, bot: Bot, text: str | None
) -> None:
    assert await bot.send_message_draft(CHAT, 1, text) is True
    draft = fake.shown_draft(CHAT)
    assert draft is not None
    assert draft.text == ""


async def test_everything_python_telegram_bot_sends_is_accepted(
    fake: FakeTelegram, bot: Bot
) -> None:
    bold = MessageEntity(MessageEntity.BOLD, 0, 4)
    sent = await bot.send_message_draft(
        CHAT, -5, "Text", message_thread_id=3, entities=[bold], api_kwargs={"can_stop": True}
    )
    assert sent is True
    draft = fake.shown_draft(CHAT)
    assert draft is not None
    assert (draft.draft_id, draft.thread_id, draft.text) == (-5, 3, "Text")


async def test_a_text_of_exactly_the_limit_is_accepted(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.send_message_draft(CHAT, 1, "x" * MAX_TEXT) is True


REFUSALS: list[tuple[str, int, dict[str, Any], str]] = [
    # (case, chat, send_message_draft arguments, words of Telegram's description)
    ("a group chat", GROUP, {"text": "hi"}, "textdraft_peer_invalid"),
    ("a zero draft id", CHAT, {"draft_id": 0, "text": "hi"}, "draft_id"),
    ("a text over 4096 characters", CHAT, {"text": "x" * (MAX_TEXT + 1)}, "too long"),
    (
        "an escaped text still over the limit",
        CHAT,
        {"text": "\\." * (MAX_TEXT + 1), "parse_mode": "MarkdownV2"},
        "too long",
    ),
    (
        "unescaped MarkdownV2",
        CHAT,
        {"text": "1.5 done", "parse_mode": "MarkdownV2"},
        "can't parse entities",
    ),
    (
        "an entity left open",
        CHAT,
        {"text": "*bold", "parse_mode": "MarkdownV2"},
        "can't parse entities",
    ),
]


@pytest.mark.parametrize(
    ("chat", "arguments", "words"),
    [row[1:] for row in REFUSALS],
    ids=[row[0] for row in REFUSALS],
)
async def test_a_draft_telegram_refuses_is_a_bad_request_and_shows_nothing(
    fake: FakeTelegram, bot: Bot, chat: int, arguments: dict[str, Any], words: str
) -> None:
    with pytest.raises(BadRequest) as refused:
        await bot.send_message_draft(chat, **{"draft_id": 1, **arguments})
    assert words in refused.value.message.lower()
    assert fake.shown_draft(chat) is None
    assert chat not in fake.draft_texts


@pytest.mark.parametrize("refuse", [True, {CHAT}], ids=["every chat", "this chat"])
async def test_refuse_drafts_answers_like_a_bot_without_drafts(
    fake: FakeTelegram, bot: Bot, refuse: bool | set[int]
) -> None:
    fake.refuse_drafts = refuse
    with pytest.raises(BadRequest, match=r"(?i)textdraft_peer_invalid"):
        await bot.send_message_draft(CHAT, 1, "hi")
    assert fake.shown_draft(CHAT) is None


async def test_refusing_drafts_in_one_chat_leaves_the_others(fake: FakeTelegram, bot: Bot) -> None:
    fake.refuse_drafts = {OTHER}
    assert await bot.send_message_draft(CHAT, 1, "hi") is True


async def test_a_draft_disappears_30_s_after_its_last_update(
    fake: FakeTelegram, bot: Bot, clock: FakeClock
) -> None:
    await bot.send_message_draft(CHAT, 1, "first")
    clock.now += 20
    await bot.send_message_draft(CHAT, 1, "second")
    clock.now += DRAFT_LIFE - 1  # 49 s after the first update, 29 s after the last
    assert fake.shown_draft(CHAT) is not None
    clock.now += 1
    assert fake.shown_draft(CHAT) is None


async def test_a_real_message_from_the_bot_dismisses_the_draft_of_its_chat_only(
    fake: FakeTelegram, bot: Bot
) -> None:
    await bot.send_message_draft(CHAT, 1, "streaming…")
    await bot.send_message_draft(OTHER, 1, "streaming too…")
    await bot.send_message(CHAT, "⚙ running tests")
    assert fake.shown_draft(CHAT) is None
    assert fake.shown_draft(OTHER) is not None
    await bot.send_message_draft(CHAT, 1, "streaming again")
    assert fake.shown_draft(CHAT) is not None


async def test_a_document_from_the_bot_dismisses_the_draft(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_message_draft(CHAT, 1, "streaming…")
    await bot.send_document(CHAT, b"log", filename="log.txt")
    assert fake.shown_draft(CHAT) is None


async def test_an_edit_of_an_earlier_message_leaves_the_draft(fake: FakeTelegram, bot: Bot) -> None:
    status = await bot.send_message(CHAT, "working")
    await bot.send_message_draft(CHAT, 1, "streaming…")
    await bot.edit_message_text("still working", CHAT, status.message_id)
    assert fake.shown_draft(CHAT) is not None


async def test_with_limits_a_draft_every_third_of_a_second_is_never_refused(
    clock: FakeClock,
) -> None:
    async with (
        FakeTelegram(enforce_limits=True, clock=clock) as fake,
        Bot(TOKEN, base_url=fake.base_url) as bot,
    ):
        for n in range(40):
            await bot.send_message_draft(CHAT, 1, f"token {n}")
            clock.now += 0.3
        assert len(fake.draft_texts[CHAT]) == 40


async def test_with_limits_a_draft_per_token_hears_retry_after(clock: FakeClock) -> None:
    async with (
        FakeTelegram(enforce_limits=True, clock=clock) as fake,
        Bot(TOKEN, base_url=fake.base_url) as bot,
    ):
        for n in range(int(DRAFT_BURST)):
            await bot.send_message_draft(CHAT, 1, f"token {n}")
        with pytest.raises(RetryAfter):
            await bot.send_message_draft(CHAT, 1, "one too many")
        await bot.send_message_draft(OTHER, 1, "another chat has its own budget")
        clock.now += 1.0
        assert await bot.send_message_draft(CHAT, 1, "after the wait") is True

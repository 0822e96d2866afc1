"""Agent text sent as plain text to Telegram: the fallback when Telegram refuses the
MarkdownV2 (the outbox resends the Markdown source as plain text), and captions.

Telegram finds mentions and links in plain text by itself: an "@username" there
notifies that person in a group, and a `tg://` address opens a profile or joins a
chat. Plain agent text gets the rule the formatted text has (bridge/render/safe_markdown.py):
an "@" starting a name is parted from it by a WORD JOINER, and so is "tg:" from "//".
The bridge itself sends no mention on Telegram, so nothing of its own is lost. Through
the real `Outbox` and `TelegramAdapter` against the fake Bot API.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import anyio
import pytest

from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.format import to_markdown_v2
from adapters.telegram.runner import make_bot
from adapters.telegram.settings import TelegramSettings
from bridge.model import ChatRef, Edit, Send, Upload
from bridge.outbox import Outbox
from tests.support.fake_telegram import TOKEN, FakeTelegram

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.model import Op

pytestmark = pytest.mark.anyio

WORD_JOINER = "\u2060"
CHAT_ID = 42
KEY, CHAT = "tg:42", ChatRef(str(CHAT_ID))
MENTION = re.compile(r"(?<!\w)@\w")
HOSTILE = "Ask @alice, or [me](tg://user?id=123), or TG://resolve?domain=evil: a@b.c"
REFUSED = "Bad Request: can't parse entities: character '!' is reserved"


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def outbox(fake: FakeTelegram) -> AsyncIterator[Outbox]:
    settings = TelegramSettings(
        token=TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url, poll_timeout=1
    )
    async with make_bot(settings) as bot, anyio.create_task_group() as tg:
        box = Outbox(TelegramAdapter(bot, drafts=False))
        await tg.start(box.run)
        yield box
        tg.cancel_scope.cancel()


async def delivered(outbox: Outbox, ops: list[Op]) -> None:
    for op in ops:
        outbox.submit(KEY, CHAT, [op])
        with anyio.fail_after(10):
            await outbox.flush()


def assert_acts_on_nothing(text: str) -> None:
    assert not MENTION.search(text), text
    assert "tg://" not in text.lower(), text


async def test_a_message_telegram_would_not_parse_goes_as_plain_text_that_mentions_nobody(
    fake: FakeTelegram, outbox: Outbox
) -> None:
    fake.fail("sendMessage", REFUSED)
    await delivered(outbox, [Send("a", to_markdown_v2(HOSTILE), HOSTILE, "formatted")])
    [message] = fake.bot_messages(CHAT_ID)
    assert message.parse_mode is None  # the fallback went out
    assert_acts_on_nothing(message.text)
    assert message.text.replace(WORD_JOINER, "") == HOSTILE


async def test_an_edit_telegram_would_not_parse_goes_as_plain_text_that_mentions_nobody(
    fake: FakeTelegram, outbox: Outbox
) -> None:
    fake.fail("editMessageText", REFUSED)
    await delivered(
        outbox,
        [
            Send("a", "Thinking", markup="plain"),
            Edit("a", to_markdown_v2(HOSTILE), HOSTILE, "formatted"),
        ],
    )
    [message] = fake.bot_messages(CHAT_ID)
    assert message.parse_mode is None
    assert_acts_on_nothing(message.text)
    assert message.text.replace(WORD_JOINER, "") == HOSTILE


async def test_a_files_caption_mentions_nobody(fake: FakeTelegram, outbox: Outbox) -> None:
    await delivered(outbox, [Upload("f", "notes.txt", b"hello", caption=HOSTILE)])
    [message] = fake.bot_messages(CHAT_ID)
    assert message.document == b"hello"
    assert_acts_on_nothing(message.text)
    assert message.text.replace(WORD_JOINER, "") == HOSTILE


async def test_plain_text_at_the_length_limit_still_fits_once_parted(
    fake: FakeTelegram, outbox: Outbox
) -> None:
    text = ("@ab " * 1024)[:4096]
    await delivered(outbox, [Send("a", text, markup="plain")])
    [message] = fake.bot_messages(CHAT_ID)
    assert not MENTION.search(message.text)
    assert len(message.text.encode("utf-16-le")) // 2 <= 4096

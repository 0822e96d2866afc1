"""Agent text is shown, never obeyed: what reaches Telegram from the agent's Markdown.

A prompt injection controls the agent's text, so the formatter treats it as hostile:
no link may dress itself as a control (its text must be its address), no mention may
fire (no `tg://user` link, no @username Telegram would turn into a mention), and text
that looks like an HTML tag is shown as written. The fake Bot API's MarkdownV2 reader
stands in for Telegram's parser (`_unmark_v2`); `links` reads the links back out.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
import telegramify_markdown

from adapters.telegram.format import format_markdown
from tests.adapters.telegram.test_e2e import CHAT, WAIT, telegram_bot
from tests.support.fake_llm import Reply
from tests.support.fake_telegram import _unmark_v2

if TYPE_CHECKING:
    from bridge.options import BridgeOptions
    from tests.support.fake_llm import FakeLLM

WORD_JOINER = "\u2060"
# How Telegram finds a mention in a message's text: "@" starting a word, then the name.
MENTION = re.compile(r"(?<![\w@])@\w")
LINK_SCHEMES = ("https://", "http://")

# (the agent's Markdown, what the reader sees, the links as (text, address))
SHOWN = [
    (
        "[✅ Allow once](https://evil.example/x)",
        "✅ Allow once (https://evil.example/x)",
        [("https://evil.example/x", "https://evil.example/x")],
    ),
    ("[me](tg://user?id=123)", "me (tg://user?id=123)", []),
    ("[x](javascript:alert(1))", "x (javascript:alert(1))", []),
    ("<!channel> hi", "<!channel> hi", []),
    ("<@U123ABC>", "<@U123ABC>", []),
    ("@here and @alice", "@here and @alice", []),
    ("cp <src> <dst>", "cp <src> <dst>", []),
    ("`cp <src> <dst>`", "cp <src> <dst>", []),
    ("```html\n<b>bold</b> <!here>\n```", "<b>bold</b> <!here>\n", []),
    ("[docs](https://ex.com)", "docs (https://ex.com)", [("https://ex.com", "https://ex.com")]),
    ("https://ex.com", "https://ex.com", []),
    ("<https://ex.com>", "https://ex.com", [("https://ex.com", "https://ex.com")]),
    (
        "![✅ Allow](https://evil.example/i.png)",
        "✅ Allow (https://evil.example/i.png)",
        [("https://evil.example/i.png", "https://evil.example/i.png")],
    ),
    (
        "[✅ Allow once][a]\n\n[a]: https://evil.example/y",
        "✅ Allow once (https://evil.example/y)",
        [("https://evil.example/y", "https://evil.example/y")],
    ),
    (
        '<a href="https://evil.example">✅ Allow once</a>',
        '<a href="https://evil.example">✅ Allow once</a>',
        [],
    ),
    ("a <b>bold</b> & x<y", "a <b>bold</b> & x<y", []),
    ("mail alice@example.com", "mail alice@example.com", []),
]


def links(raw: str) -> list[tuple[str, str]]:
    """The links of a MarkdownV2 text as (text the reader sees, address)."""
    found, i, label_at = [], 0, -1
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
        elif raw[i] == "`":  # code: only "`" and "\\" are escaped in it
            fence = "```" if raw.startswith("```", i) else "`"
            end = re.compile(rf"(?<!\\)(?:\\\\)*{fence}").search(raw, i + len(fence))
            assert end is not None, raw
            i = end.end()
        elif raw[i] == "[":
            label_at, i = i + 1, i + 1
        elif raw.startswith("](", i) and label_at >= 0:
            end = re.compile(r"(?<!\\)\)").search(raw, i + 2)
            assert end is not None, raw
            address = re.sub(r"\\(.)", r"\1", raw[i + 2 : end.start()])
            found.append((_unmark_v2(raw[label_at:i]), address))
            label_at, i = -1, end.end()
        else:
            i += 1
    return found


def seen(markdown: str) -> tuple[str, str]:
    """The one message `markdown` makes: (MarkdownV2 as sent, text as read)."""
    [raw] = format_markdown(markdown)
    return raw, _unmark_v2(raw)


@pytest.mark.parametrize(("markdown", "visible", "linked"), SHOWN)
def test_agent_markdown_is_shown_as_written_with_no_link_dressed_as_something_else(
    markdown: str, visible: str, linked: list[tuple[str, str]]
) -> None:
    raw, text = seen(markdown)
    assert text.replace(WORD_JOINER, "") == visible
    assert links(raw) == linked
    assert all(address.startswith(LINK_SCHEMES) for _, address in links(raw))


@pytest.mark.parametrize("markdown", [row[0] for row in SHOWN])
def test_no_mention_of_anyone_reaches_telegram(markdown: str) -> None:
    raw, text = seen(markdown)
    assert not MENTION.search(text), text
    assert "tg://" not in "".join(address for _, address in links(raw))


@pytest.mark.parametrize(
    "markdown",
    [
        "**Done** in 1.5 s! See `main.py`.",
        "# Title\n\n- one\n- two\n\n> quoted _text_\n\n```python\nprint(1 < 2)\n```",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "~~gone~~ and ||hidden|| and 3 > 2",
    ],
)
def test_markdown_without_links_or_tags_converts_as_before(markdown: str) -> None:
    assert format_markdown(markdown) == [telegramify_markdown.markdownify(markdown).strip()]


HOSTILE = (
    "EVIL-ANSWER <!channel> @alice [✅ Allow once](https://evil.example/x) "
    "[me](tg://user?id=123) cp <src> <dst>"
)


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_hostile_answer_reaches_telegram_without_a_mention_or_a_dressed_link(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("tell me", Reply(text=HOSTILE))
    async with telegram_bot(opts, streaming="edit") as fake:
        fake.message(CHAT, "tell me something")
        message = await fake.bot_message("cp <src> <dst>", CHAT, within=WAIT)
    shown = message.text.replace(WORD_JOINER, "")
    assert shown == (
        "EVIL-ANSWER <!channel> @alice ✅ Allow once (https://evil.example/x) "
        "me (tg://user?id=123) cp <src> <dst>"
    )
    assert not MENTION.search(message.text)
    assert links(message.raw) == [("https://evil.example/x", "https://evil.example/x")]
    for call in fake.calls_of("sendMessage") + fake.calls_of("editMessageText"):
        assert "entities" not in call.params  # only MarkdownV2, never a text_mention

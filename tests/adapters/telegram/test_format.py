"""Markdown → Telegram MarkdownV2: conversion, UTF-16 length, splitting at boundaries.

The fake Bot API's MarkdownV2 reader stands in for Telegram's parser: every piece
must parse, fit 4096 UTF-16 units, and show the text the Markdown meant.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.format import MAX_TEXT, format_markdown, split_plain, utf16_len
from tests.support.fake_telegram import _unmark_v2


def shown(piece: str) -> str:
    return _unmark_v2(piece)


def test_markdown_becomes_markdown_v2_that_telegram_parses() -> None:
    [piece] = format_markdown("**Done** in 1.5 s! See [docs](https://example.org/a_b).")
    assert piece.startswith("*Done*")
    # A link shows its address (tests/adapters/telegram/test_agent_text.py).
    assert shown(piece) == "Done in 1.5 s! See docs (https://example.org/a_b)."


def test_every_reserved_character_is_escaped() -> None:
    text = "a_b *c* [d] (e) ~f~ `g` >h #i +j -k =l |m| {n} .o !p"
    [piece] = format_markdown(text)
    shown(piece)  # raises "can't parse entities" if one was missed


def test_code_blocks_keep_their_content_unescaped() -> None:
    [piece] = format_markdown("```python\nprint(1.5 - 2)\n```")
    assert "print(1.5 - 2)" in piece
    assert shown(piece).strip() == "print(1.5 - 2)"


def test_empty_markdown_gives_no_messages() -> None:
    assert format_markdown("") == []
    assert format_markdown("   \n\n") == []


def test_long_text_splits_at_paragraphs() -> None:
    paragraphs = [f"Paragraph {i}. " + "word " * 150 for i in range(12)]
    pieces = format_markdown("\n\n".join(paragraphs), MAX_TEXT)
    assert len(pieces) > 1
    assert all(utf16_len(p) <= MAX_TEXT for p in pieces)
    for piece in pieces:  # no paragraph is cut in two
        assert shown(piece).lstrip().startswith("Paragraph")


def test_a_long_code_block_is_closed_and_reopened_in_each_piece() -> None:
    code = "```bash\n" + "\n".join(f"echo line {i}." for i in range(900)) + "\n```"
    pieces = format_markdown(code, MAX_TEXT)
    assert len(pieces) > 1
    for piece in pieces:
        assert piece.startswith("```bash\n")
        assert piece.rstrip().endswith("```")
        shown(piece)


def test_length_counts_utf16_units_after_conversion() -> None:
    # 3000 emoji are 6000 UTF-16 units: two messages although 3000 characters < 4096.
    pieces = format_markdown("😀" * 3000, MAX_TEXT)
    assert len(pieces) == 2
    assert all(utf16_len(p) <= MAX_TEXT for p in pieces)


def test_escapes_that_push_a_piece_over_the_limit_split_it_again() -> None:
    dots = ". " * 1500  # 3000 characters, about 4500 once every "." is escaped
    pieces = format_markdown(dots, MAX_TEXT)
    assert len(pieces) == 2
    assert all(utf16_len(p) <= MAX_TEXT for p in pieces)


def test_plain_fallback_splits_by_utf16_units() -> None:
    pieces = split_plain("🙂" * 2100 + "\n\n" + "tail", MAX_TEXT)
    assert all(utf16_len(p) <= MAX_TEXT for p in pieces)
    assert "".join(pieces).count("🙂") == 2100


@pytest.mark.parametrize("limit", [50, 200, MAX_TEXT])
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "word",
                "1.5!",
                "**bold**",
                "_it_",
                "`code`",
                "😀",
                "[l](http://x.y)",
                "\n",
                "\n\n",
                "- item",
                "# Head",
                "```py\nx = 1\n```",
                "a-b",
                "(p)",
            ]
        ),
        max_size=80,
    ).map(" ".join)
)
def test_any_markdown_gives_pieces_that_parse_and_fit(limit: int, markdown: str) -> None:
    for piece in format_markdown(markdown, limit):
        assert utf16_len(piece) <= limit
        assert piece.strip()
        shown(piece)

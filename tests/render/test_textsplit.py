"""`split_text` cuts long text where a reader expects a break, and code fences survive it.

Examples pin the preferences (paragraph, line, space, hard cut; fences closed and
reopened); hypothesis checks the two promises for any text: no piece over the
limit, and nothing lost but whitespace at the cuts.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.render.textsplit import split_text

FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,}).*")


def fence_lines(piece: str) -> int:
    return sum(1 for line in piece.split("\n") if FENCE_LINE.fullmatch(line))


@pytest.mark.parametrize(
    ("text", "limit", "pieces"),
    [
        ("short", 10, ["short"]),
        ("", 10, []),
        ("one two\n\nthree four", 12, ["one two", "three four"]),
        ("aaaa\nbbbb\n\ncccc", 10, ["aaaa\nbbbb", "cccc"]),
        ("aaaa\nbbbb\ncccc", 10, ["aaaa\nbbbb", "cccc"]),
        ("aaa bbb ccc ddd", 8, ["aaa bbb", "ccc ddd"]),
        ("abcdefghij", 4, ["abcd", "efgh", "ij"]),
        ("para\n\n\n\n\nnext", 6, ["para", "next"]),
    ],
    ids=[
        "short text stays whole",
        "empty text gives no pieces",
        "a paragraph break is the first choice",
        "a paragraph break beats a later line break",
        "a line break comes next",
        "then a space",
        "then a hard cut",
        "blank lines at a cut are dropped",
    ],
)
def test_text_is_cut_at_the_best_break_that_fits(text: str, limit: int, pieces: list[str]) -> None:
    assert split_text(text, limit) == pieces


def test_a_cut_inside_a_code_fence_closes_it_and_reopens_it_with_its_language() -> None:
    code = "\n".join(f"x = {i}" for i in range(12))
    pieces = split_text(f"Look:\n\n```python\n{code}\n```\n\nDone.", 40)
    assert all(len(p) <= 40 for p in pieces)
    assert pieces[0] == "Look:"
    assert pieces[-1] == "Done."
    for piece in pieces[1:-1]:
        assert piece.startswith("```python\n")
        assert piece.endswith("\n```")
    body = [line for p in pieces[1:-1] for line in p.split("\n")[1:-1]]
    assert body == code.split("\n")


def test_a_fence_is_not_cut_when_a_break_outside_it_fits() -> None:
    text = "intro line\n\n```\nshort code\n```\n\nmore text after the code"
    pieces = split_text(text, 40)
    assert pieces == ["intro line\n\n```\nshort code\n```", "more text after the code"]


def test_a_tilde_fence_is_reopened_with_tildes() -> None:
    pieces = split_text("~~~sh\n" + "echo hi\n" * 10 + "~~~", 30)
    assert all(p.startswith("~~~sh\n") and p.endswith("~~~") for p in pieces)
    assert all(fence_lines(p) == 2 for p in pieces)


def test_a_fence_is_cut_hard_inside_a_line_that_is_longer_than_the_limit() -> None:
    pieces = split_text("```\n" + "x" * 50 + "\n```", 20)
    assert all(len(p) <= 20 for p in pieces)
    assert all(p.startswith("```\n") for p in pieces)
    assert "".join(p.replace("```", "").replace("\n", "") for p in pieces) == "x" * 50


def test_a_limit_too_small_for_fence_markers_still_makes_progress() -> None:
    pieces = split_text("```python\ncode\n```", 5)
    assert all(0 < len(p) <= 5 for p in pieces)


def test_the_unicode_line_separator_is_not_a_line_break() -> None:
    text = "left\u2028right and more"
    assert split_text(text, 11) == ["left\u2028right", "and more"]


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        split_text("x", 0)


# --- properties -----------------------------------------------------------------------------

_WORDS = st.sampled_from(["a", "bb", "ccc", "dddd", "é", "😀", "x" * 30, "\u2028"])
_LINES = st.one_of(
    st.lists(_WORDS, max_size=8).map(" ".join),
    st.sampled_from(["```", "```PY", "````", "~~~", "~~~SH", "", "  ```", "`x`"]),
)
_TEXTS = st.lists(_LINES, max_size=40).map("\n".join)
# Only whitespace and fence markers (` ~ and the upper-case languages) may be added or lost.
_NOISE = re.compile(r"[\s`~A-Z]")


def _content(text: str) -> str:
    return _NOISE.sub("", text)


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS, limit=st.integers(min_value=1, max_value=120))
def test_no_piece_is_over_the_limit_or_blank(text: str, limit: int) -> None:
    for piece in split_text(text, limit):
        assert 0 < len(piece) <= limit
        assert piece.strip()


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS, limit=st.integers(min_value=1, max_value=120))
def test_joining_the_pieces_gives_back_the_text_but_whitespace_and_fence_markers(
    text: str, limit: int
) -> None:
    assert _content("".join(split_text(text, limit))) == _content(text)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_WORDS, max_size=200).map(" ".join).map(lambda t: t.replace("ccc", "\n")),
    limit=st.integers(min_value=1, max_value=80),
)
def test_without_fences_every_piece_is_a_slice_of_the_text_in_order(text: str, limit: int) -> None:
    cursor = 0
    for piece in split_text(text, limit):
        found = text.find(piece, cursor)
        assert found >= cursor
        assert not text[cursor:found].strip()  # only whitespace was dropped between
        cursor = found + len(piece)
    assert not text[cursor:].strip()

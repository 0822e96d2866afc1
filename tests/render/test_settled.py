"""`settled` and `sealed`: how much of a text still being written a stream may show.

A stream (Slack's chat.appendStream) only ever adds to what it holds, and what it holds
must be shown, never obeyed, at every moment. So the bridge streams `disarmed(settled(…))`
of the text so far: it must be disarmed Markdown itself (nothing in it acts), and it
must stay the beginning of what it streams next, however the text goes on.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.render.growing_markdown import sealed
from bridge.render.growing_markdown import settled as settled_part
from bridge.render.safe_markdown import disarmed
from tests.render.test_disarmed import MENTION, PIECES, read

SETTLED = [
    ("I will", "I will"),
    ("I will ", "I will"),
    ("mail me @", "mail me"),
    ("Press [✅ Allow once]", "Press"),
    ("Press [✅ Allow once](https://evil.example/x", "Press"),
    ("Press [✅ Allow](https://ex.co/x) now", "Press [✅ Allow](https://ex.co/x) now"),
    ("See [a] and", "See [a] and"),
    ("Run `git log @", "Run"),
    ("Run `git log @{u}` now", "Run `git log @{u}` now"),
    ("Run `x`", "Run"),  # a longer run of backticks may follow
    ("cp <src", "cp"),
    ("cp <src> <dst>", "cp <src> <dst>"),
    ("a < b", "a < b"),
    ("ask @", "ask"),
    ("x &amp", "x"),
    ("x \\", "x"),
    ("wow!", "wow"),
    ("Done.\n\n```sh\necho hi\n", "Done.\n\n"),
    ("Done.\n\n```sh\necho hi\n```\n", "Done.\n\n```sh\necho hi\n```\n"),
    ("Done.\n\n    indented code", "Done.\n\n"),
    ("Done.\n\n<div>\nhi", "Done.\n\n"),
    ("- one\n- two [x", "- one\n- two"),
    ("> quoted [x", "> quoted"),
    ("| a | b |\n|---|---|\n| 1 | [x", "| a | b |\n|---|---|\n| 1 |"),
    ("[r]: https://evil.example", ""),
]


@pytest.mark.parametrize(("markdown", "part"), SETTLED)
def test_a_growing_text_is_settled_up_to_what_still_waits_for_more(
    markdown: str, part: str
) -> None:
    assert settled_part(markdown) == part


@pytest.mark.parametrize(
    ("markdown", "whole"),
    [
        ("Done.\n\n```sh\necho hi", "Done.\n\n```sh\necho hi\n```"),
        ("> ````\n> x\n", "> ````\n> x\n> ````"),
        ("1. ~~~\n   x", "1. ~~~\n   x\n   ~~~"),
        ("```\nx\n```", "```\nx\n```"),
        ("no code", "no code"),
    ],
)
def test_a_whole_text_ending_in_open_code_is_closed(markdown: str, whole: str) -> None:
    assert sealed(markdown) == whole
    assert read(sealed(markdown) + "\n\n[a](https://x)")[1] == [("a", "https://x")]


def shown_so_far(markdown: str) -> str:
    return disarmed(settled_part(markdown), streamed=True)


def assert_inert(markdown: str) -> None:
    assert disarmed(markdown, streamed=True) == markdown
    _, links, html, prose = read(markdown)
    assert html == []
    assert all(label == address and address.startswith("http") for label, address in links)
    assert not MENTION.search(prose), markdown


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=25).map("".join), st.data())
def test_what_a_stream_shows_of_a_growing_text_never_acts(
    markdown: str, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(markdown)))
    assert_inert(shown_so_far(markdown[:cut]))
    assert_inert(sealed(disarmed(markdown, streamed=True)))


# What an agent writes, without what `settled` cannot see coming: entities and escapes
# (whose text run a later "<" rewrites whole) and reference definitions.
PLAIN_PIECES = [p for p in PIECES if not ({"&", "\\"} & set(p) or "]:" in p)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PLAIN_PIECES), max_size=25).map("".join), st.data())
def test_what_a_stream_showed_stays_the_beginning_of_what_it_shows_next(
    markdown: str, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(markdown)), min_size=1, max_size=4)))
    whole = sealed(disarmed(markdown, streamed=True))
    shown = [shown_so_far(markdown[:cut]) for cut in cuts] + [whole]
    for before, after in itertools.pairwise(shown):
        assert after.startswith(before), (before, after)

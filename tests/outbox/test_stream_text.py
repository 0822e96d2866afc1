"""What a native stream takes of an op (`markdown_of`) and how an append is cut
(`pieces`): the text a posted message would show, only as far as it is settled while
it grows, and pieces that end where the text before them is settled.
"""

from __future__ import annotations

import pytest

from bridge.model import Edit, Send
from bridge.outbox.streams import markdown_of, pieces


@pytest.mark.parametrize(
    ("op", "streamed"),
    [
        (Send("t", "See [a](https://e", draft=True), "See"),
        (Edit("t", "See [a](https://e.x) ok", draft=True), "See a (<https://e.x>) ok"),
        (Edit("t", "See [a](https://e"), "See [a](https://e"),  # whole: text, not a link
        (Edit("t", "*a*", plain="cp <src> @bob", markup="formatted"), "cp &lt;src&gt; @\u2060bob"),
        (Edit("t", "Here:\n\n```sh\necho hi", draft=True), "Here:\n\n"),
        (Edit("t", "Here:\n\n```sh\necho hi"), "Here:\n\n```sh\necho hi\n```"),
        (
            Edit("t", "[r]: https://evil.example\n\n[r]"),
            "\\[r]: https://evil.example\n\nr (<https://evil.example>)",
        ),
    ],
)
def test_a_stream_takes_what_a_posted_message_shows_as_far_as_it_is_settled(
    op: Send | Edit, streamed: str
) -> None:
    assert markdown_of(op) == streamed


def test_an_append_too_long_for_one_request_is_cut_before_an_open_code_block() -> None:
    assert pieces("para one\n\n```\ncode\n```", 15) == ["para one\n\n", "```\ncode\n```"]
    assert pieces("a <https://ex.com/x> b", 12) == ["a", " <https://ex", ".com/x> b"]
    assert "".join(pieces("x" * 25, 10)) == "x" * 25

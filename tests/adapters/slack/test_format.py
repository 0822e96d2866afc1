"""Markdown → Slack messages: chunks fit one markdown block, blocks stay inside
Block Kit's limits (checked with the fake Slack's own validator)."""

from __future__ import annotations

import pytest

from adapters.slack.format import (
    MARKDOWN_BLOCK_MAX,
    SECTION_TEXT_MAX,
    fallback_text,
    format_markdown,
    message_blocks,
)
from bridge.model import Button
from tests.support.fake_slack import check_message


def test_short_markdown_is_one_chunk_unchanged() -> None:
    text = "**Done.** See `main.py`:\n\n```python\nprint('hi')\n```"
    assert format_markdown(text, 12_000) == [text]


def test_long_markdown_splits_under_the_markdown_block_limit_even_with_a_larger_limit() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 200 for i in range(30))
    chunks = format_markdown(text, 50_000)
    assert len(chunks) > 1
    assert all(len(c) <= MARKDOWN_BLOCK_MAX for c in chunks)


def test_a_cut_code_fence_is_closed_and_reopened() -> None:
    code = "\n".join(f"line {i}" for i in range(400))
    chunks = format_markdown(f"```python\n{code}\n```", 1_000)
    assert len(chunks) > 1
    assert all(c.startswith("```python") and c.rstrip().endswith("```") for c in chunks)


def test_formatted_text_goes_in_a_markdown_block_with_an_escaped_fallback() -> None:
    fallback, blocks = message_blocks("a <b> & **c**", "formatted", ())
    # Shown as written, never read as a tag (tests/adapters/slack/test_agent_text.py).
    assert blocks == [{"type": "markdown", "text": "a &lt;b&gt; &amp; **c**"}]
    assert fallback == "a &lt;b&gt; &amp; **c**"


def test_plain_text_goes_in_plain_sections_of_at_most_3000_characters() -> None:
    text = "\n".join("x" * 90 for _ in range(100))
    _, blocks = message_blocks(text, "plain", ())
    assert len(blocks) > 1
    assert all(b["type"] == "section" and b["text"]["type"] == "plain_text" for b in blocks)
    assert all(len(b["text"]["text"]) <= SECTION_TEXT_MAX for b in blocks)
    assert check_message({"text": "x", "blocks": blocks}) == ""


def test_buttons_are_rows_of_actions_with_unique_ids_and_opaque_values() -> None:
    keyboard = (
        (Button("Yes", "tok-yes"), Button("No", "tok-no")),
        (Button("Always allow this very long command " * 5, "t" * 3000),),
    )
    _, blocks = message_blocks("Allow `rm -rf build`?", "formatted", keyboard)
    actions = [b for b in blocks if b["type"] == "actions"]
    assert len(actions) == 2
    first = actions[0]["elements"]
    assert [e["value"] for e in first] == ["tok-yes", "tok-no"]
    assert check_message({"text": "x", "blocks": blocks}) == ""


@pytest.mark.parametrize("markup", ["formatted", "plain"])
def test_an_empty_message_still_has_something_to_show(markup: str) -> None:
    fallback, blocks = message_blocks("", markup, ())  # type: ignore[arg-type]
    assert check_message({"text": fallback, "blocks": blocks}) == ""


def test_buttons_alone_need_no_text_block() -> None:
    _, blocks = message_blocks("", "plain", ((Button("Stop", "s"),),))
    assert [b["type"] for b in blocks] == ["actions"]


def test_the_fallback_escapes_slack_control_characters() -> None:
    assert fallback_text("if a<b && c>d") == "if a&lt;b &amp;&amp; c&gt;d"

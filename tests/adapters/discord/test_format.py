"""Markdown → Discord messages (split at 2,000, shown and never obeyed), plain text shown
as written, keyboards → components within Discord's limits, forms → modals. Pure."""

from __future__ import annotations

import pytest

from adapters.discord.adapter import LIMITS
from adapters.discord.convert import token_of
from adapters.discord.format import (
    CUSTOM_ID_MAX,
    INPUT_LABEL_MAX,
    INPUT_VALUE_MAX,
    LABEL_MAX,
    MODAL_TITLE_MAX,
    buttons,
    format_markdown,
    modal,
    plain,
    shown,
    size,
)
from bridge.model import Button, Form
from bridge.render.safe_markdown import WORD_JOINER as WJ


@pytest.mark.parametrize(
    ("markdown", "discord"),
    [
        ("**bold** and `code`", "**bold** and `code`"),
        ("ping <@123> and <@&7> in <#5>", f"ping \\<@{WJ}123\\> and \\<@&7\\> in \\<#5\\>"),
        ("hello @everyone and @here", f"hello @{WJ}everyone and @{WJ}here"),
        ("[click me](https://evil.example/x)", "click me (<https://evil.example/x>)"),
        ("see https://example.com/a", "see https://example.com/a"),
        ("a < b & c > d", "a \\< b & c \\> d"),
        ("x &lt;@1&gt; y", f"x \\<@{WJ}1\\> y"),
        ("<b>bold</b>", "\\<b\\>bold\\</b\\>"),
        (
            "<t:1700000000:R> </stop:1> <:emoji:9>",
            "\\<t:1700000000:R\\> \\</stop:1\\> \\<:emoji:9\\>",
        ),
        ("`<@123> & <#5>`", "`<@123> & <#5>`"),
        ("```\n<@123> & @everyone\n```", "```\n<@123> & @everyone\n```"),
    ],
    ids=[
        "formatting stays",
        "mentions of users, roles and channels are text",
        "broadcasts are parted",
        "a masked link shows its address",
        "a bare address stays a link",
        "angle brackets and ampersands",
        "entities the agent wrote",
        "raw html",
        "timestamps, command mentions, custom emoji",
        "code spans are shown as written",
        "code blocks are shown as written",
    ],
)
def test_agent_markdown_is_shown_not_obeyed(markdown: str, discord: str) -> None:
    assert shown(markdown) == discord


def test_a_long_answer_is_split_into_messages_of_at_most_2000_that_each_render() -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(400))
    markdown = "Intro.\n\n```python\n" + code + "\n```\n\n" + "words " * 600
    pieces = format_markdown(markdown, LIMITS.max_text)
    assert len(pieces) >= 4
    assert all(size(p) <= 2000 for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    assert all(f"line_{i} = {i}" in "\n".join(pieces) for i in range(400))


def test_the_length_counts_utf16_units_never_fewer_than_discord() -> None:
    pieces = format_markdown("🎉" * 1500, 2000)
    assert all(size(p) <= 2000 for p in pieces)
    assert "".join(pieces).count("🎉") == 1500
    assert format_markdown("   ", 2000) == []


def test_plain_text_shows_as_written() -> None:
    assert plain("# not a title\n- not a list\n1. not a list") == (
        "\\# not a title\n\\- not a list\n1\\. not a list"
    )
    assert plain("*a* _b_ ~c~ |d| `e` <@1> [f](g)") == (
        f"\\*a\\* \\_b\\_ \\~c\\~ \\|d\\| \\`e\\` \\<@{WJ}1\\> \\[f\\](g)"
    )
    assert plain("") == "…"
    long = plain("*" * 1500)  # the escapes double it: cut to fit
    assert size(long) == 2000
    assert long.endswith("…")


def test_a_keyboard_fits_discords_rows_and_ids() -> None:
    wide = tuple(Button(f"choice {i}", f"tok{i}") for i in range(7))
    keyboard = (wide, (Button("Cancel", "tokC"),))
    specs = buttons(keyboard)
    assert [s.row for s in specs] == [0, 0, 0, 0, 0, 1, 1, 2]  # 7 wrap after 5
    assert [token_of(s.custom_id) for s in specs] == [*(f"tok{i}" for i in range(7)), "tokC"]
    assert len({s.custom_id for s in specs}) == len(specs)  # unique in the message
    same = buttons(((Button("a", "t"), Button("b", "t")),))
    assert len({s.custom_id for s in same}) == 2  # one token twice still differs


def test_what_does_not_fit_is_left_out_not_refused() -> None:
    many = tuple((Button("x" * 200, f"t{r}{c}"),) * 1 for r in range(8) for c in range(1))
    specs = buttons(many)
    assert max(s.row for s in specs) == 4
    assert all(len(s.label) <= LABEL_MAX for s in specs)
    longest = "t" * LIMITS.max_button_data
    assert len(buttons(((Button("ok", longest),),))[0].custom_id) == CUSTOM_ID_MAX
    assert buttons(((Button("too long", longest + "x"),),)) == []


def test_a_form_becomes_a_modal_within_discords_limits() -> None:
    spec = modal(Form("Why deny this command?", placeholder="a reason"), "tok")
    assert (spec.custom_id, spec.title, spec.default) == ("pif:tok", "Why deny this command?", "")
    assert spec.placeholder == "a reason"
    long = modal(Form("t" * 100, prefill="x" * 5000, multiline=True), "tok")
    assert len(long.title) <= MODAL_TITLE_MAX
    assert len(long.label) <= INPUT_LABEL_MAX
    assert len(long.default) == INPUT_VALUE_MAX
    assert "Cut" in long.label
    assert modal(Form("edit", prefill="a\nb"), "tok").multiline

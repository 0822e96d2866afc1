"""The fake Bot API's MarkdownV2 parser refuses what Telegram refuses.

The Telegram tests trust the fake to catch a formatter that forgets an escape; this
table holds it to the Bot API's documented rules (formatting options, MarkdownV2
style): every reserved character outside code escaped or a marker of a well-formed
entity, every entity closed.
"""

from __future__ import annotations

import pytest

from tests.support.fake_telegram import ApiError, _unmark_v2

SHOWN = [
    ("plain words", "plain words"),
    (r"1\.5 \- 2 \= \-0\.5\!", "1.5 - 2 = -0.5!"),
    ("*bold* _italic_ __under__ ~strike~ ||spoiler||", "bold italic under strike spoiler"),
    ("*bold _nested_ still*", "bold nested still"),
    ("[docs](https://example.org/a_b)", "docs"),
    (r"[a \] b](https://example.org/x\)y)", "a ] b"),
    ("`a_b*c[d]`", "a_b*c[d]"),
    (r"`back\`quote`", "back`quote"),
    ("```python\nprint(1.5 - 2)\n```", "print(1.5 - 2)\n"),
    ("> quoted\n>more", " quoted\nmore"),
    (r"\_\*\[\]\(\)\~\`\>\#\+\-\=\|\{\}\.\!", "_*[]()~`>#+-=|{}.!"),
]

REFUSED = [
    ("a_b", "end of the entity"),
    ("2*3", "end of the entity"),
    ("see [docs]", "reserved"),
    ("f(x)", "reserved"),
    ("x)", "reserved"),
    ("a | b", "reserved"),
    ("~strike", "end of the entity"),
    ("||spoiler|", "reserved"),
    ("`open code", "end of the entity"),
    ("```\nopen pre", "end of the entity"),
    ("[text](https://example.org", "end of a url"),
    ("*bold _crossed* over_", "end of the entity"),
    ("1.5", "reserved"),
    ("a > b", "reserved"),
    ("issue #3", "reserved"),
    ("wow!", "reserved"),
]


@pytest.mark.parametrize(("raw", "visible"), SHOWN)
def test_well_formed_markdown_v2_shows_its_text(raw: str, visible: str) -> None:
    assert _unmark_v2(raw) == visible


@pytest.mark.parametrize(("raw", "why"), REFUSED)
def test_what_telegram_refuses_the_fake_refuses(raw: str, why: str) -> None:
    with pytest.raises(ApiError, match="can't parse entities") as refused:
        _unmark_v2(raw)
    assert why in refused.value.description

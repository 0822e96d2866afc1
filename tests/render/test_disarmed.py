"""`disarmed`: the agent's Markdown made to show, not act, before any platform sees it.

The invariant is read back with the same parser: no raw HTML, no link but one showing
its own http(s) address, no "@" that starts a name in the text, and a second pass
changes nothing; streamed, no definition a later "[name]" would link to either. The
platforms' own tables are in tests/adapters/*/test_agent_text.py.
"""

from __future__ import annotations

import re
from typing import Any

import pyromark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.render.safe_markdown import WORD_JOINER, disarmed, literal

OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
)
MENTION = re.compile(r"(?<!\w)@\w")
J = WORD_JOINER

CASES = [
    ("plain **bold** text", "plain **bold** text"),
    ("cp <src> <dst>", "cp &lt;src&gt; &lt;dst&gt;"),
    ("`cp <src>` and\n```\n<b>@here</b>\n```", "`cp <src>` and\n```\n<b>@here</b>\n```"),
    ("[✅ Allow](https://evil.example/x)", "✅ Allow (<https://evil.example/x>)"),
    ("[https://ex.com](https://ex.com)", "<https://ex.com>"),
    ("[me](tg://user?id=1)", "me (tg://user?id\\=1)"),
    ("[x](<https://a b|c>)", "x (<https://a%20b%7Cc>)"),
    ("<a@b.c>", "a@b.c"),
    ("[a ![i](http://i) `c`](http://x)", "a i c (<http://x>)"),
    (
        "[go][r]\n\n[r]: https://evil.example",
        "go (<https://evil.example>)\n\n[r]: https://evil.example",
    ),
    ("@alice, mail a@b.c", f"@{J}alice, mail a@b.c"),
    ("x &#64;here", f"x @{J}here"),
    ("a & b &lt; c", "a &amp; b &lt; c"),
    ("\\<b> x", "&lt;b&gt; x"),
    ("\\\\<b> x", "\\\\&lt;b&gt; x"),
    (
        "<div>\n[✅ Allow](https://evil)\n</div>",
        "&lt;div&gt;\n\\[✅ Allow\\]\\(https://evil\\)\n&lt;/div&gt;",
    ),
    ("> quoted <x>\n> more", "> quoted &lt;x&gt;\n> more"),
    ("| a \\| b | <c> |\n|---|---|\n| 1 | 2 |", "| a \\| b | &lt;c&gt; |\n|---|---|\n| 1 | 2 |"),
]


@pytest.mark.parametrize(("markdown", "expected"), CASES)
def test_agent_markdown_becomes_markdown_that_only_shows(markdown: str, expected: str) -> None:
    assert disarmed(markdown) == expected


def test_math_is_left_as_written_when_the_platform_reads_math() -> None:
    assert disarmed("$a < b$ <c>", math=True) == "$a < b$ &lt;c&gt;"
    assert disarmed("$a < b$") == "$a &lt; b$"


def test_literal_text_shows_itself() -> None:
    text = "# 1. *x* [y](z) <b> & @bob | `c` ~d~"
    assert read(literal(text))[0] == text.replace("@", "@" + J)


def read(markdown: str) -> tuple[str, list[tuple[str, str]], list[str], str]:
    """(the text a reader sees, the links as (text, address), the raw HTML, the text
    outside code)."""
    text: list[str] = []
    prose: list[str] = []
    links: list[tuple[str, str]] = []
    html: list[str] = []
    label: list[str] | None = None
    address, in_code = "", False
    event: Any
    for event in pyromark.events(markdown, options=OPTIONS):
        if not isinstance(event, dict):
            text.append(" ")
            prose.append(" ")
        elif "Text" in event or "Code" in event:
            text.append(str(event.get("Text", event.get("Code", ""))))
            prose.append(" " if in_code or "Code" in event else text[-1])
            if label is not None:
                label.append(text[-1])
        elif "InlineHtml" in event or "Html" in event:
            html.append(str(event.get("InlineHtml", event.get("Html", ""))))
        elif isinstance(start := event.get("Start"), dict) and {"Link", "Image"} & start.keys():
            address, label = (start.get("Link") or start.get("Image") or {})["dest_url"], []
        elif event.get("End") in ("Link", "Image") and label is not None:
            links.append(("".join(label), address))
            label = None
        elif isinstance(start, dict) or event.get("End") == "CodeBlock":
            in_code = isinstance(start, dict) and "CodeBlock" in start
    return "".join(text), links, html, "".join(prose)


PIECES = [
    "word",
    "@here",
    "@bob",
    "a@b.c",
    "<!channel>",
    "<@U1>",
    "<b>",
    "</b>",
    "<https://ex.com>",
    "[✅ Allow](https://evil.example)",
    "[me](tg://user?id=1)",
    "![i](http://x/i.png)",
    "[r]",
    "\n\n[r]: https://evil.example\n\n",
    "`<@U1>`",
    "\n```\n<!here>\n```\n",
    "&lt;",
    "&#64;",
    "&",
    "\\",
    "\\<",
    "*",
    "_",
    "]",
    "(",
    ")",
    "|",
    "\n",
    "\n\n",
    "> ",
    "- ",
    "<div>\n",
    "\n</div>\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_whatever_the_agent_writes_nothing_in_it_acts(markdown: str) -> None:
    once = disarmed(markdown)
    assert disarmed(once) == once
    _, links, html, prose = read(once)
    assert html == []
    assert all(label == address and address.startswith("http") for label, address in links)
    assert not MENTION.search(prose), once
    streamed = disarmed(markdown, streamed=True)
    assert read(streamed + "\n\n[r]")[1] == read(streamed)[1]  # it defines no link


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        (
            "[go][r]\n\n[r]: https://evil.example",
            "go (<https://evil.example>)\n\n\\[r]: https://evil.example",
        ),
        ("> [r]: /x\n> [r]", "> \\[r]: /x\n> r (/x)"),
        ("[a]: /x\n[b]: /y", "\\[a]: /x\n[b]: /y"),
    ],
)
def test_a_streamed_text_shows_its_definitions_as_text(markdown: str, expected: str) -> None:
    assert disarmed(markdown, streamed=True) == expected

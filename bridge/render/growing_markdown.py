"""A Markdown text still being written: how much of it is settled, and closing it.

A stream's text is shown only as far as nothing written after it changes it as
`disarmed` (safe_markdown.py) reads it (`settled`); a text cut inside a fenced code
block is closed as it opened (`sealed`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyromark

from bridge.render.safe_markdown import MARKDOWN_OPTIONS

# Blocks whose text is read as it grows; a code or HTML block is shown once closed (its
# content is not Markdown: a stream cut inside it could go on as text).
_GROWING = frozenset({"Paragraph", "Heading", "Item", "TableHead", "TableRow", "Rule"})
_HELD = frozenset({"CodeBlock", "HtmlBlock"})
# What may still change meaning as more text comes: an escape, a code span's backticks,
# a link's "[" and "]", a "<" that could open a tag or an autolink, and an end that the
# next character could make an entity, an image or a fence of "~".
_OPENER = re.compile(r"\\.?|`+|!?\[|\]|<(?=[A-Za-z/!?]|$)|&#?\w*$|!$|~+$", re.DOTALL)
_FENCE = re.compile(r"`{3,}|~{3,}")
_UNSETTLED = " \t@"  # an end the next character changes: an "@" (a name?), spaces (code?)
_LIST_MARKER = re.compile(r"[-+*]|\d{1,9}[.)]")


def settled(markdown: str) -> str:
    """The beginning of a growing `markdown` that no text written after it changes as
    `disarmed` reads it (but a reference defined later): every block but the last, and
    of the last what no opener still waits on; a code or HTML block once closed."""
    source = markdown.encode()
    last = _last_block(source)
    if last.kind in _HELD and not last.closed(source):
        return source[: last.start].decode().rstrip(_UNSETTLED)
    head = source[: last.end if last.kind in _HELD else last.start].decode()
    rest = markdown[len(head) :]
    return (head + rest[: _pending(rest)]).rstrip(_UNSETTLED)


def sealed(markdown: str) -> str:
    """`markdown` with a fenced code block left open at its end closed as it opened (in
    its quote or list item): no text put after it is read as code, nor its code as text."""
    source = markdown.encode()
    last = _last_block(source)
    if last.kind != "CodeBlock" or not last.fenced or last.closed(source):
        return markdown
    line = source[source.rfind(b"\n", 0, last.start) + 1 :].split(b"\n", 1)[0].decode()
    fence = _FENCE.search(line)
    if fence is None:
        return markdown
    indent = _LIST_MARKER.sub(lambda m: " " * len(m[0]), line[: fence.start()])
    return markdown + ("" if markdown.endswith("\n") else "\n") + indent + fence[0]


@dataclass
class _Block:
    """The last block a Markdown text opens (byte offsets into its UTF-8 source)."""

    kind: str = ""
    start: int = 0
    end: int = 0
    fenced: bool = False
    body: int = 0  # a code block's: where its content ends

    def closed(self, source: bytes) -> bool:
        """A fenced code block is closed when a fence follows its content."""
        tail = source[self.body : self.end]
        return self.kind == "CodeBlock" and self.fenced and (b"`" in tail or b"~" in tail)


def _last_block(source: bytes) -> _Block:
    last = _Block()
    for event, span in pyromark.events_with_range(source.decode(), options=MARKDOWN_OPTIONS):
        opened = event.get("Start") if isinstance(event, dict) else event
        name = next(iter(opened)) if isinstance(opened, dict) else opened
        if name in _GROWING or name in _HELD:
            fenced = isinstance(opened, dict) and isinstance(opened[name], dict)
            line_end = source.find(b"\n", span["start"])
            body = len(source) if line_end < 0 else line_end + 1
            last = _Block(str(name), span["start"], span["end"], fenced, body)
        elif last.kind == "CodeBlock" and isinstance(event, dict) and "Text" in event:
            last.body = span["end"]
    return last


def _pending(text: str) -> int:
    """Where the text of the block being written (from its start) may yet change
    meaning: the first opener still waiting for its closer; else its length."""
    brackets: list[int] = []  # where each "[" not yet closed starts
    at = 0
    while (found := _OPENER.search(text, at)) is not None:
        token, at = found[0], found.end()
        if token[0] == "`":
            close = re.compile(f"(?<!`){token}(?!`)").search(text, at)
            if close is not None and close.end() < len(text):
                at = close.end()
                continue
        elif token.endswith("["):
            brackets.append(found.start())
            continue
        elif token == "]":
            if brackets:
                start, after = brackets.pop(), _after_label(text, at)
                if after is None:
                    return min([*brackets, start])
                at = after
            continue
        elif (token[0] == "\\" and len(token) == 2) or (token == "<" and ">" in text[at:]):
            continue
        return min([*brackets, found.start()])
    return min([*brackets, len(text)])


def _after_label(text: str, at: int) -> int | None:
    """Where what follows a bracketed label at `at` is decided (after a link's "(…)");
    None while it may still become a link or a definition."""
    if at == len(text) or text[at] == ":":
        return None
    if text[at] != "(":
        return at  # a "[" after it opens a label of its own
    depth, i = 0, at
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
        i += 1
    return None

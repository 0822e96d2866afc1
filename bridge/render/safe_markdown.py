"""Agent Markdown made safe to show (`disarmed`): shown, never obeyed.

Agent text is shown, never obeyed (a prompt injection writes it): `disarmed` is the
pass over the parsed Markdown (pyromark, the CommonMark parser under
telegramify-markdown) that each platform's formatter runs first. Raw HTML becomes
the text it is written as; a link or image becomes its text with its address after it
(one whose text is its address stays a link; only http and https stay links at all);
in plain text `<`, `>` and `&` are written as entities and an "@" starting a word is
parted from it by a WORD JOINER, so no platform reads a tag, a control or a mention
in it. Code is left as written. The pass repeats until it finds nothing to change,
which is the invariant: the result parses with no raw HTML, no link but those
showing their address, and no mention. A stream's text, which more text follows in
the same message, also shows each link reference definition as text
(growing_markdown.py shows it only as far as nothing written after it changes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyromark

if TYPE_CHECKING:
    from collections.abc import Iterator


WORD_JOINER = "\u2060"  # invisible and not a word character: "@" and a name stay apart
MARKDOWN_OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
)
_WEB = ("http://", "https://")
_ROUNDS = 5  # a second pass finds nothing to change; more means a parser surprise
# An "@" a name could follow: in this run, after a spoiler's "||" (telegramify-markdown
# reads those) or emphasis, or after the run ends (`@**bob**`); after "_" too, which
# may end up closing emphasis before it (so a growing text parts it the same way).
_MENTION = re.compile(r"(?<![^\W_])@(?=[\w|*~`]|$)")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_RAW = re.compile(r"[<>]|&(?!#?\w+;)")  # what a platform could read as markup in text
# What could be Markdown where a replacement lands (at a line start, in a table cell).
_MARKUP = re.compile(r"[\\`*_\[\]~|#+\-=()!$]|(?<=\d)\.")
# An address as an autolink: CommonMark takes no space, "<" or ">" in one, and mrkdwn
# would read a "|" as the start of a link's label.
_URL_SAFE = "/:?#[]@!$&'()*+,;=%~"

Edit = tuple[int, int, str]  # UTF-8 byte range of the source, and its replacement


def disarmed(markdown: str, *, math: bool = False, streamed: bool = False) -> str:
    """`markdown` with nothing left in it that acts, only text that shows; `math`: parse
    `$…$` as math (as the Telegram converter does) so math is left as written;
    `streamed`: more text follows in the same message, so no definition is kept."""
    options = (MARKDOWN_OPTIONS | pyromark.Options.ENABLE_MATH) if math else MARKDOWN_OPTIONS
    for _ in range(_ROUNDS):
        source = markdown.encode()
        found = _edits(source, options, streamed=streamed)
        edits = [e for e in found if source[e[0] : e[1]] != e[2].encode()]
        if not edits:
            return markdown
        markdown = _applied(source, edits)
    return literal(markdown)  # not seen: rather all of it as text than anything that acts


def literal(text: str) -> str:
    """Markdown that shows `text` as it is: no markup, no HTML, no mention."""
    parted = _MENTION.sub("@" + WORD_JOINER, text)
    return _entities(_MARKUP.sub(lambda m: "\\" + m[0], parted))


def _plain(text: str) -> str:
    """`text` with "<", ">" and "&" as entities and each "@" parted from the name after it."""
    return _entities(_MENTION.sub("@" + WORD_JOINER, text))


def _entities(text: str) -> str:
    return "".join(_ENTITIES.get(c, c) for c in text)


@dataclass
class _Link:
    """A link or image being read: its source range, its data, the text it shows."""

    start: int
    end: int
    data: dict[str, str]
    label: list[str] = field(default_factory=list)
    nested: int = 0  # links and images inside it (an image in a link's text)

    def ended_by(self, event: Any) -> bool:
        """Take in one event inside the link; True for the event that ends it."""
        if not isinstance(event, dict):
            self.label.append(" ")  # a line break in the link's text
        elif isinstance(event.get("Start"), dict) and {"Link", "Image"} & event["Start"].keys():
            self.nested += 1
        elif event.get("End") in ("Link", "Image"):
            if not self.nested:
                return True
            self.nested -= 1
        else:
            self.label += [v for k, v in event.items() if k in ("Text", "Code", "InlineHtml")]
        return False


def _edits(source: bytes, options: pyromark.Options, *, streamed: bool) -> Iterator[Edit]:
    """What to replace in `source`, in order; links and raw HTML whole, text in runs,
    and in a stream the "[" opening each link reference definition (`_definition`)."""
    reader = _Reader(source, streamed)
    markdown = source.decode()
    for event, span in pyromark.events_with_range(markdown, options=options, merge_text=True):
        yield from reader.read(event, span["start"], span["end"])
    if streamed:
        yield from _definition(source, reader.seen, len(source))


@dataclass
class _Reader:
    """Where `_edits` is in the events: inside a link, inside a code block, and how
    far the events have read `source`."""

    source: bytes
    streamed: bool
    link: _Link | None = None
    in_code: bool = False
    seen: int = 0

    def read(self, event: Any, start: int, end: int) -> Iterator[Edit]:
        """The edits one event (spanning `start`..`end` of the source) asks for."""
        opened = event.get("Start") if isinstance(event, dict) else None
        if self.streamed and start > self.seen and self.link is None and not self.in_code:
            yield from _definition(self.source, self.seen, start)
        self.seen = max(self.seen, start if opened is not None else end)
        link = self.link
        if link is not None:
            if link.ended_by(event):
                yield link.start, link.end, _shown_link("".join(link.label), link.data)
                self.link = None
        elif isinstance(opened, dict) and {"Link", "Image"} & opened.keys():
            self.link = _Link(start, end, opened.get("Link") or opened["Image"])
        elif isinstance(event, dict):
            yield from self._outside_links(event, opened, start, end)

    def _outside_links(
        self, event: dict[str, Any], opened: Any, start: int, end: int
    ) -> Iterator[Edit]:
        if isinstance(opened, dict) and "CodeBlock" in opened:
            self.in_code = True  # code shows as written: nothing in it is read
        elif event.get("End") == "CodeBlock":
            self.in_code = False
        elif "Text" in event and not self.in_code:
            yield from _text_edit(self.source, start, end, event["Text"])
        elif "InlineHtml" in event or "Html" in event:
            yield start, end, literal(event.get("InlineHtml") or event["Html"])
        elif "InlineMath" in event or "DisplayMath" in event:
            # Shown as code, but telegramify-markdown reads "$5 or $6" as text again.
            yield start, end, _MENTION.sub("@" + WORD_JOINER, self.source[start:end].decode())


def _definition(source: bytes, start: int, end: int) -> Iterator[Edit]:
    """A link reference definition is the only Markdown no event reports: what lies
    between events holds one where it holds a "[". Escaped, it is a paragraph's text,
    and no "[name]" in the stream becomes its link, even one before it (another
    message of a run's stream; a posted message links none of its own)."""
    at = source.find(b"[", start, end)
    if at >= 0:
        yield at, at + 1, "\\["


def _text_edit(source: bytes, start: int, end: int, text: str) -> Iterator[Edit]:
    """A run of plain text whose source holds a raw "<", ">" or "&", or that shows a
    mention: changed in place when the source spells the text out, rewritten whole
    (`literal`) when it holds escapes or entities."""
    written = source[start:end].decode()
    if not (_RAW.search(written) or _MENTION.search(text)):
        return
    if _escaped(source, start):
        yield start - 1, end, literal(text)  # the backslash goes with the escaped character
    else:
        yield start, end, _plain(text) if written == text else literal(text)


def _escaped(source: bytes, at: int) -> bool:
    """Whether the character at `at` follows an escaping backslash (an odd run of them)."""
    run = 0
    while run < at and source[at - run - 1] == ord("\\"):
        run += 1
    return run % 2 == 1


def _shown_link(label: str, data: dict[str, str]) -> str:
    """A link or image as text: its label, then its address (a link only for the web)."""
    address, kind = data["dest_url"], data["link_type"]
    web = kind != "Email" and address.lower().startswith(_WEB)
    shown = f"<{quote(address, safe=_URL_SAFE)}>" if web else literal(address)
    if kind in ("Autolink", "Email") or not label.strip() or label == address:
        return shown
    return f"{literal(label)} ({shown})"


def _applied(source: bytes, edits: list[Edit]) -> str:
    out, at = [], 0
    for start, end, replacement in edits:
        out += [source[at:start], replacement.encode()]
        at = end
    out.append(source[at:])
    return b"".join(out).decode()


def unmentioned(text: str) -> str:
    """`text` with each "@" that starts a name parted from it by a WORD JOINER (for
    text a platform reads without any markup)."""
    return _MENTION.sub("@" + WORD_JOINER, text)

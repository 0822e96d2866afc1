"""Small text helpers the renderer's parts share: Markdown code spans and blocks,
clipping, human durations, and agent Markdown made safe to show (`disarmed`).

Code spans and fences are made longer than any backtick run inside them, so
agent output can never close them early.

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
the same message, also shows each link reference definition as text, and is shown
only as far as nothing written after it changes it (`settled`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyromark

if TYPE_CHECKING:
    from collections.abc import Iterator

_BACKTICKS = re.compile(r"`+")


def _longest_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code_block(text: str, language: str = "") -> str:
    fence = "`" * max(3, _longest_run(text) + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def inline_code(text: str) -> str:
    if not text:
        return ""
    ticks = "`" * (_longest_run(text) + 1)
    # CommonMark strips one space on each side, so a span may start with a backtick.
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def clip(text: str, limit: int) -> str:
    """At most `limit` characters; a cut ends with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def one_line(text: str, limit: int) -> str:
    """The first line of `text`, marked when more follows, clipped to `limit`."""
    stripped = text.strip()
    first, _, rest = stripped.partition("\n")
    return clip(first.rstrip() + (" …" if rest.strip() else ""), limit)


def tail(text: str, lines: int, chars: int) -> str:
    """The last `lines` lines of `text` (at most `chars` characters), with a note of
    how many lines were left out."""
    all_lines = text.rstrip("\n").split("\n")
    kept = all_lines[-lines:] if lines > 0 else []
    body = "\n".join(kept)
    if len(body) > chars:
        body = "…" + body[len(body) - chars + 1 :]
    skipped = len(all_lines) - len(kept)
    return (f"… {skipped} more line{_s(skipped)}\n" if skipped else "") + body


def duration(seconds: float) -> str:
    """ "0.4 s", "12 s", "3 min 05 s", "1 h 02 min"."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def delay(seconds: float) -> str:
    """A wait announced ahead: "2 s", "1.5 s", "30 s", then as `duration`."""
    if seconds < 60:
        return f"{round(max(0.0, seconds), 1):g} s"
    return duration(seconds)


def count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


# --- Agent Markdown, shown and not obeyed -----------------------------------------------

WORD_JOINER = "\u2060"  # invisible and not a word character: "@" and a name stay apart
_OPTIONS = (
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
    options = (_OPTIONS | pyromark.Options.ENABLE_MATH) if math else _OPTIONS
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


# --- A text still being written ---------------------------------------------------------

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
    for event, span in pyromark.events_with_range(source.decode(), options=_OPTIONS):
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

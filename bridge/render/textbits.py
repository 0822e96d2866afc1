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
showing their address, and no mention.
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
# reads those), or after the run ends (`@**bob**`).
_MENTION = re.compile(r"(?<!\w)@(?=[\w|]|$)")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_RAW = re.compile(r"[<>]|&(?!#?\w+;)")  # what a platform could read as markup in text
# What could be Markdown where a replacement lands (at a line start, in a table cell).
_MARKUP = re.compile(r"[\\`*_\[\]~|#+\-=()!$]|(?<=\d)\.")
# An address as an autolink: CommonMark takes no space, "<" or ">" in one, and mrkdwn
# would read a "|" as the start of a link's label.
_URL_SAFE = "/:?#[]@!$&'()*+,;=%~"

Edit = tuple[int, int, str]  # UTF-8 byte range of the source, and its replacement


def disarmed(markdown: str, *, math: bool = False) -> str:
    """`markdown` with nothing left in it that acts, only text that shows; `math`: parse
    `$…$` as math (as the Telegram converter does) so math is left as written."""
    options = (_OPTIONS | pyromark.Options.ENABLE_MATH) if math else _OPTIONS
    for _ in range(_ROUNDS):
        source = markdown.encode()
        edits = [e for e in _edits(source, options) if source[e[0] : e[1]] != e[2].encode()]
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


def _edits(source: bytes, options: pyromark.Options) -> Iterator[Edit]:
    """What to replace in `source`, in order; links and raw HTML whole, text in runs."""
    link: _Link | None = None
    in_code = False
    event: Any
    markdown = source.decode()
    for event, span in pyromark.events_with_range(markdown, options=options, merge_text=True):
        start, end = span["start"], span["end"]
        opened = event.get("Start") if isinstance(event, dict) else None
        if link is not None:
            if link.ended_by(event):
                yield link.start, link.end, _shown_link("".join(link.label), link.data)
                link = None
        elif isinstance(opened, dict) and {"Link", "Image"} & opened.keys():
            link = _Link(start, end, opened.get("Link") or opened["Image"])
        elif not isinstance(event, dict):
            continue
        elif isinstance(opened, dict) and "CodeBlock" in opened:
            in_code = True  # code shows as written: nothing in it is read
        elif event.get("End") == "CodeBlock":
            in_code = False
        elif "Text" in event and not in_code:
            yield from _text_edit(source, start, end, event["Text"])
        elif "InlineHtml" in event or "Html" in event:
            yield start, end, literal(event.get("InlineHtml") or event["Html"])
        elif "InlineMath" in event or "DisplayMath" in event:
            # Shown as code, but telegramify-markdown reads "$5 or $6" as text again.
            yield start, end, _MENTION.sub("@" + WORD_JOINER, source[start:end].decode())


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

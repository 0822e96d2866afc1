"""Markdown → Discord messages, buttons → message components, a form → a modal (pure).

Discord's markdown is close to CommonMark (bold, italics, code spans and fences, quotes,
lists, headings, masked links), so formatted text is sent as Markdown, split into
messages of at most 2,000 characters (resources/message#create-message: content up
to 2000 characters) by `bridge.render.textsplit.split_text` (paragraphs, then lines;
a code fence cut is closed and reopened). Length is measured in UTF-16 units, never
less than Discord's count, however it counts.

The Markdown is the agent's, and a prompt injection may write it: it is shown, never
obeyed. `disarmed` (bridge/render/safe_markdown.py) runs first: a link shows its address,
raw HTML and an "@" before a name (`@everyone`, `@here`) are parted or written as
text, and in text `<`, `>` and `&` become entities. Discord reads no entities, so in
text (never in code, which shows as written) they become backslash escapes instead
(`_escaped`): `\\<@123>` shows as written where `<@123>` would be a mention, and so
for roles, channels, slash commands, custom emoji and timestamps. Every message also
goes out with no mention allowed (the adapter's `AllowedMentions.none()`), so even
what is shown pings nobody.

Plain text (the bridge's own notes, a fallback, a caption) shows as written: every
markdown character is escaped and each "@" parted from a name (`plain`).

Components (components/reference): at most 5 action rows of at most 5 buttons; a
button's custom_id at most 100 characters and unique in its message, its label at
most 80. A modal (interactions/receiving-and-responding#interaction-response-object-
modal): title at most 45 characters, a text input's label 45, its value and
max_length 4,000, its placeholder 100.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyromark

from adapters.discord.convert import button_id, form_id
from bridge.render.safe_markdown import disarmed, unmentioned
from bridge.render.textbits import clip
from bridge.render.textsplit import split_text

if TYPE_CHECKING:
    from bridge.model import Form, Keyboard

log = logging.getLogger(__name__)

MAX_TEXT = 2000
MAX_ROWS = 5
MAX_BUTTONS_PER_ROW = 5
CUSTOM_ID_MAX = 100
# `pi<row><column>:`: what a button's custom_id holds besides the token.
BUTTON_ID_OVERHEAD = len(button_id(0, 0, ""))
LABEL_MAX = 80
MODAL_TITLE_MAX = 45
INPUT_LABEL_MAX = 45
INPUT_VALUE_MAX = 4000
PLACEHOLDER_MAX = 100
EMPTY = "…"  # Discord refuses a message with no content and nothing else (50006)

_ENTITY = re.compile(r"&(lt|gt|amp);")
_ESCAPES = {"lt": "\\<", "gt": "\\>", "amp": "&"}
# What Discord's markdown reads, anywhere in a line or at its start.
_SPECIAL = re.compile(r"[\\*_~|`<>\[\]]")
_LINE_START = re.compile(r"^(\s*)([#>+-])", re.MULTILINE)
_ORDERED = re.compile(r"^(\s*\d+)\.", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ButtonSpec:
    label: str
    custom_id: str
    row: int


@dataclass(frozen=True, slots=True)
class ModalSpec:
    custom_id: str
    title: str
    label: str
    default: str
    multiline: bool
    placeholder: str


def size(text: str) -> int:
    """Discord's length, never undercounted: UTF-16 units (an emoji counts 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def format_markdown(markdown: str, limit: int = MAX_TEXT) -> list[str]:
    """Messages of at most `limit` (≤ 2,000) showing `markdown`, disarmed; [] for none."""
    limit = max(1, min(limit, MAX_TEXT))
    out: list[str] = []
    pending = split_text(markdown, limit)[::-1]  # a stack: the next piece is last
    while pending:
        piece = pending.pop()
        rendered = shown(piece)
        length = size(rendered)
        if length <= limit:
            if rendered.strip():
                out.append(rendered)
            continue
        smaller = min(len(piece) - 1, len(piece) * limit // length - 1)
        if smaller < 1:
            out.append(clipped(rendered, limit))
            continue
        pending.extend(split_text(piece, smaller)[::-1])
    return out


def shown(markdown: str) -> str:
    """The agent's Markdown as Discord shows it: nothing in it acts."""
    return _escaped(disarmed(markdown))


def _escaped(markdown: str) -> str:
    """`markdown` (disarmed) with the entities of its text, which Discord would show as
    written, made backslash escapes; code is left alone."""
    source = markdown.encode()
    edits: list[tuple[int, int, str]] = []
    in_code = False
    for event, span in pyromark.events_with_range(markdown, merge_text=True):
        if not isinstance(event, dict):
            continue
        opened = event.get("Start")
        if isinstance(opened, dict) and "CodeBlock" in opened:
            in_code = True
        elif event.get("End") == "CodeBlock":
            in_code = False
        elif "Text" in event and not in_code:
            start, end = span["start"], span["end"]
            written = source[start:end].decode()
            if "&" in written:
                edits.append((start, end, _ENTITY.sub(lambda m: _ESCAPES[m[1]], written)))
    out, at = [], 0
    for start, end, replacement in edits:
        out += [source[at:start], replacement.encode()]
        at = end
    out.append(source[at:])
    return b"".join(out).decode()


def plain(text: str, limit: int = MAX_TEXT) -> str:
    """Text shown exactly as written: markdown escaped, no "@name" a mention; cut to
    `limit` (with an ellipsis) when the escapes made it longer."""
    escaped = _SPECIAL.sub(lambda m: "\\" + m[0], text)
    escaped = _LINE_START.sub(lambda m: m[1] + "\\" + m[2], escaped)
    escaped = _ORDERED.sub(lambda m: m[1] + "\\.", escaped)
    escaped = unmentioned(escaped)
    if not escaped.strip():
        return EMPTY
    return clipped(escaped, limit)


def clipped(text: str, limit: int) -> str:
    """At most `limit` UTF-16 units; a cut ends with an ellipsis."""
    if size(text) <= limit:
        return text
    units = text.encode("utf-16-le", "surrogatepass")[: max(0, limit - 1) * 2]
    return units.decode("utf-16-le", "ignore") + "…"


def buttons(keyboard: Keyboard) -> list[ButtonSpec]:
    """The keyboard as Discord takes it: rows of at most 5 (a longer row goes on in the
    next), at most 5 rows (what does not fit is left out, and logged)."""
    per_row = MAX_BUTTONS_PER_ROW
    rows = [row[i : i + per_row] for row in keyboard for i in range(0, len(row), per_row)]
    if len(rows) > MAX_ROWS:
        left = sum(len(r) for r in rows[MAX_ROWS:])
        log.warning("%d buttons left out: Discord shows at most 25 in a message", left)
    specs = []
    for r, row in enumerate(rows[:MAX_ROWS]):
        for c, button in enumerate(row):
            custom_id = button_id(r, c, button.token)
            if len(custom_id) > CUSTOM_ID_MAX:
                log.warning("a button's token is too long for Discord; left out")
                continue
            specs.append(ButtonSpec(_label(button.label), custom_id, r))
    return specs


def _label(label: str) -> str:
    return clip(label.strip(), LABEL_MAX) or EMPTY


def modal(form: Form, token: str) -> ModalSpec:
    """The modal for a button's `form`; a prefill over Discord's 4,000 characters is
    cut, and the field's label says so."""
    label = form.title.strip() or "Your answer"
    default = form.prefill
    if len(default) > INPUT_VALUE_MAX:
        default = default[:INPUT_VALUE_MAX]
        label = "Cut to 4,000 characters: replaces all"
    return ModalSpec(
        custom_id=form_id(token),
        title=clip(form.title.strip(), MODAL_TITLE_MAX) or "Your answer",
        label=clip(label, INPUT_LABEL_MAX),
        default=default,
        multiline=form.multiline or "\n" in default,
        placeholder=clip(form.placeholder.strip(), PLACEHOLDER_MAX),
    )

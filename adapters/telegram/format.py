"""Markdown → Telegram MarkdownV2, split into messages that fit.

Conversion is telegramify-markdown's (a maintained CommonMark → MarkdownV2
converter: it escapes every reserved character, so Telegram's "can't parse
entities" should not happen; if it does the outbox resends the plain fallback).

The Markdown is the agent's, and a prompt injection may write it: it is shown, never
obeyed. `disarmed` (bridge/render/safe_markdown.py) runs first, so text that looks like a
tag arrives as written (the converter drops raw HTML), a link shows its address, and
an @username is not one Telegram would turn into a mention. The converter's entities
are then held to that (`_inert`): only formatting, and links whose text is their own
http(s) address; never a `text_mention`, a `tg://` link or a custom emoji. Text sent
without a parse mode (the fallback when Telegram refuses the MarkdownV2, which is the
Markdown source; captions) is read by Telegram for mentions and links all the same:
`plain` parts each "@" from a name and "tg:" from its address with a WORD JOINER. The
bridge sends no mention of its own on Telegram, so nothing it means is lost.

Splitting happens on the Markdown source (`bridge.render.textsplit.split_text`: at
paragraphs, then lines, closing and reopening code fences), so each message
renders on its own and the renderer's plain fallback pieces line up one to one.
Length is measured after conversion, in UTF-16 code units as Telegram counts
(MessageLimit.MAX_TEXT_LENGTH); a piece whose conversion is over the limit is
split again, smaller, until it fits.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import telegramify_markdown
from telegram.constants import MessageLimit

from bridge.render.safe_markdown import WORD_JOINER, disarmed, unmentioned
from bridge.render.textsplit import split_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from telegramify_markdown import MessageEntity

MAX_TEXT = int(MessageLimit.MAX_TEXT_LENGTH)
# The entities agent text may carry (Bot API MessageEntity types): formatting only.
_FORMATTING = frozenset(
    {
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "code",
        "pre",
        "blockquote",
        "expandable_blockquote",
    }
)
_WEB = ("http://", "https://")
_TG_ADDRESS = re.compile(r"(?<![\w.+-])tg:(?=\S)", re.IGNORECASE)


def utf16_len(text: str) -> int:
    """Telegram's length: UTF-16 code units (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def to_markdown_v2(markdown: str) -> str:
    """One piece of Markdown as MarkdownV2 (no length check); the converter reads `$…$`
    as math, and so does the pass before it."""
    text, entities = telegramify_markdown.convert(disarmed(markdown, math=True))
    return telegramify_markdown.entities_to_markdownv2(text, _inert(text, entities)).strip()


def format_markdown(markdown: str, limit: int = MAX_TEXT) -> list[str]:
    """MarkdownV2 messages of at most `limit` UTF-16 units each; `[]` for empty text."""
    return _fit(markdown, limit, to_markdown_v2)


def plain(text: str, limit: int = MAX_TEXT) -> str:
    """Text Telegram gets without a parse mode, shown and not obeyed: no "@name" it
    would make a mention, no `tg:` address it would make a link; a text within `limit`
    UTF-16 units that the word joiners make longer is cut to fit, with an ellipsis (one
    already over it is refused as it is: TooLong, and the outbox cuts it)."""
    parted = _TG_ADDRESS.sub(lambda m: m[0] + WORD_JOINER, unmentioned(text))
    if utf16_len(parted) <= limit or utf16_len(text) > limit:
        return parted
    units = parted.encode("utf-16-le", "surrogatepass")[: max(0, limit - 1) * 2]
    return units.decode("utf-16-le", "ignore") + "…"


def split_plain(text: str, limit: int = MAX_TEXT) -> list[str]:
    """Plain-text messages of at most `limit` UTF-16 units (the fallback path)."""
    return _fit(text, limit, lambda piece: piece)


def _fit(text: str, limit: int, render: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    pending = split_text(text, limit)[::-1]  # a stack: the next piece is last
    while pending:
        source = pending.pop()
        rendered = render(source)
        size = utf16_len(rendered)
        if size <= limit:
            if rendered.strip():
                out.append(rendered)
            continue
        smaller = min(len(source) - 1, len(source) * limit // size - 1)
        if smaller < 1:
            raise ValueError(f"one character renders longer than {limit}")
        pending.extend(split_text(source, smaller)[::-1])
    return out


def _inert(text: str, entities: list[MessageEntity]) -> list[MessageEntity]:
    """The entities that only format: a link stays one only when it shows its own
    http(s) address."""
    units = text.encode("utf-16-le", "surrogatepass")  # offsets count UTF-16 units

    def shown(entity: MessageEntity) -> str:
        start, end = entity.offset * 2, (entity.offset + entity.length) * 2
        return units[start:end].decode("utf-16-le", "surrogatepass")

    def link(entity: MessageEntity) -> bool:
        url = entity.url or ""
        return entity.type == "text_link" and url.startswith(_WEB) and shown(entity) == url

    return [e for e in entities if e.type in _FORMATTING or link(e)]

"""Markdown → Slack messages: Block Kit `markdown` blocks, plain sections, buttons.

Slack renders standard Markdown in a `markdown` block, so formatted text needs no
conversion, only splitting: at most 12,000 characters of markdown-block text per
message. Plain text goes in `plain_text` sections (3,000 characters each) so no
mrkdwn is interpreted. Buttons are `actions` blocks, one per keyboard row, with
action ids unique in the message (Block Kit rejects duplicates) and the bridge's
opaque token as the value. Every message also carries a `text` fallback, shown
in notifications. Limits: api.slack.com/reference/block-kit/blocks. A native
stream's content goes as chunks (`chunks`): markdown text and task cards
(docs.slack.dev/messaging/sending-and-scheduling-messages#text-streaming).

The Markdown is the agent's, and a prompt injection may write it: it is shown, never
obeyed. Slack's reference does not say whether a markdown block acts on mrkdwn's
controls (`<!here>`, `<!channel>`, `<!everyone>`, `<!subteam^…>`, `<@U…>`, `<#C…>`,
`<url|label>`) or on a bare `@here`, so what is sent holds either way. A block gets
`disarmed` Markdown (bridge/render/safe_markdown.py: in text `<`, `>` and `&` become
entities, raw HTML shows as written, a link shows its address, "@" is parted from a
name), and in code, which is shown verbatim, each control is broken by a WORD JOINER
after its "<" (`_guarded`), and so is a broadcast's "@". A stream's text comes already
disarmed from the outbox (`bridge.outbox.streams.markdown_of`: what a block would show,
sent as far as it is settled), so each piece only gets `_guarded` too, and a piece cut
inside a word (only a run longer than a request takes) never ends in a "<" or "@" the
next piece could complete (`streamed`). Other mrkdwn fields with agent text (a file's
caption, the thread's status line, the fallback) get Slack's escaping (`mrkdwn`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from adapters.slack.convert import ACTION_PREFIX
from bridge.render.safe_markdown import WORD_JOINER, disarmed
from bridge.render.textsplit import split_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Keyboard, Markup, Task

MARKDOWN_BLOCK_MAX = 12_000  # cumulative markdown-block text per message
SECTION_TEXT_MAX = 3_000
MAX_BLOCKS = 50
MESSAGE_TEXT_MAX = 40_000  # Slack truncates the top-level `text` beyond this
BUTTON_LABEL_MAX = 75
BUTTON_VALUE_MAX = 2_000
ACTIONS_ELEMENTS_MAX = 25
EMPTY = "…"  # Slack refuses a message with neither text nor blocks
TASK_FIELD_MAX = 256  # a task_update chunk's title and output

Block = dict[str, Any]

# mrkdwn's controls (docs.slack.dev/messaging/formatting-message-text): a special
# mention, a user, a channel, a labelled link.
_CONTROL = re.compile(r"<(?=[!@#]|[A-Za-z][\w+.-]*:[^\s<>]*\|)")
_BROADCASTS = ("here", "channel", "everyone")
_BROADCAST = re.compile(rf"(?<!\w)@(?=(?:{'|'.join(_BROADCASTS)})\b)", re.IGNORECASE)
# The end of a stream piece that the next piece could make a control or a broadcast.
_OPEN_END = re.compile(rf"<(?!{WORD_JOINER})[^\s<>]*$|(?<!\w)@(\w*)$")


def format_markdown(markdown: str, limit: int) -> list[str]:
    """Markdown split into messages whose markdown block (`shown`) fits."""
    limit = max(1, min(limit, MARKDOWN_BLOCK_MAX))
    out: list[str] = []
    pending = split_text(markdown, limit)[::-1]  # a stack: the next piece is last
    while pending:
        piece = pending.pop()
        size = len(shown(piece))
        if size <= limit or len(piece) <= 1:
            out.append(piece)
        else:  # entities made it longer: split it again, smaller
            pending.extend(split_text(piece, max(1, len(piece) * limit // size - 1))[::-1])
    return out


def shown(markdown: str) -> str:
    """The agent's Markdown as a markdown block gets it: shown, not obeyed."""
    return _guarded(disarmed(markdown))


def streamed(piece: str) -> str:
    """A piece of a stream's text, disarmed already (`markdown_of`), as a block gets it."""
    return _closed(_guarded(piece))


def message_blocks(text: str, markup: Markup, buttons: Keyboard) -> tuple[str, list[Block]]:
    """The `text` fallback and the blocks of one message."""
    actions = action_blocks(buttons)
    room = MAX_BLOCKS - len(actions)
    if markup == "formatted" and text.strip():
        body: list[Block] = [{"type": "markdown", "text": shown(text)}]
    else:
        body = [_section(piece) for piece in split_text(text, SECTION_TEXT_MAX)[:room]]
    if not body and not actions:
        body = [_section(EMPTY)]
    return fallback_text(text), body + actions


def chunks(markdown: str, tasks: Sequence[Task] = ()) -> list[Block]:
    """A stream's content: a piece of its text (`streamed`), then a task_update chunk
    per card. Always chunks, never `markdown_text`: Slack refuses a stream that mixes
    the two ways."""
    content: list[Block] = (
        [{"type": "markdown_text", "text": streamed(markdown)}] if markdown else []
    )
    for task in tasks:
        card: Block = {"type": "task_update", "id": task.id, "status": task.status}
        card["title"] = _guarded(task.title)[:TASK_FIELD_MAX] or "tool"
        if task.output.strip():
            card["output"] = _guarded(task.output)[-TASK_FIELD_MAX:]
        content.append(card)
    return content


def fallback_text(text: str) -> str:
    return mrkdwn(text)[:MESSAGE_TEXT_MAX] or EMPTY


def mrkdwn(text: str) -> str:
    """Text for a field Slack reads as mrkdwn, where &, < and > are control characters
    (docs.slack.dev/messaging/formatting-message-text#escaping): escaped, and a
    broadcast's "@" parted from its name."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST.sub("@" + WORD_JOINER, escaped)


def action_blocks(buttons: Keyboard) -> list[Block]:
    blocks = []
    for r, row in enumerate(buttons):
        elements = [
            {
                "type": "button",
                "action_id": f"{ACTION_PREFIX}{r}.{c}",
                "text": {"type": "plain_text", "text": _label(b.label), "emoji": True},
                "value": b.token[:BUTTON_VALUE_MAX],
            }
            for c, b in enumerate(row[:ACTIONS_ELEMENTS_MAX])
        ]
        if elements:
            block_id = f"pi_bridge_row_{r}"
            blocks.append({"type": "actions", "block_id": block_id, "elements": elements})
    return blocks[: MAX_BLOCKS - 1]


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "plain_text", "text": text, "emoji": True}}


def _label(label: str) -> str:
    label = label.strip() or EMPTY
    return label if len(label) <= BUTTON_LABEL_MAX else label[: BUTTON_LABEL_MAX - 1] + "…"


def _guarded(text: str) -> str:
    """`text` with each mrkdwn control and broadcast broken by a WORD JOINER."""
    return _BROADCAST.sub("@" + WORD_JOINER, _CONTROL.sub("<" + WORD_JOINER, text))


def _closed(piece: str) -> str:
    """`piece` with a "<", or an "@" starting a broadcast's name, at its end parted
    from what the next piece may add."""
    end = _OPEN_END.search(piece)
    if end is None or (
        end[1] is not None and not any(w.startswith(end[1].lower()) for w in _BROADCASTS)
    ):
        return piece
    return piece[: end.start() + 1] + WORD_JOINER + piece[end.start() + 1 :]

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.slack.convert import ACTION_PREFIX
from bridge.textsplit import split_text

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


def format_markdown(markdown: str, limit: int) -> list[str]:
    """Markdown split into messages that each fit one markdown block."""
    return split_text(markdown, max(1, min(limit, MARKDOWN_BLOCK_MAX)))


def message_blocks(text: str, markup: Markup, buttons: Keyboard) -> tuple[str, list[Block]]:
    """The `text` fallback and the blocks of one message."""
    actions = action_blocks(buttons)
    room = MAX_BLOCKS - len(actions)
    if markup == "formatted" and text.strip():
        body: list[Block] = [{"type": "markdown", "text": text}]
    else:
        body = [_section(piece) for piece in split_text(text, SECTION_TEXT_MAX)[:room]]
    if not body and not actions:
        body = [_section(EMPTY)]
    return fallback_text(text), body + actions


def chunks(markdown: str, tasks: Sequence[Task] = ()) -> list[Block]:
    """A stream's content: the Markdown, then a task_update chunk per card. Always
    chunks, never `markdown_text`: Slack refuses a stream that mixes the two ways."""
    content: list[Block] = [{"type": "markdown_text", "text": markdown}] if markdown else []
    for task in tasks:
        card: Block = {"type": "task_update", "id": task.id, "status": task.status}
        card["title"] = task.title[:TASK_FIELD_MAX] or "tool"
        if task.output.strip():
            card["output"] = task.output[-TASK_FIELD_MAX:]
        content.append(card)
    return content


def fallback_text(text: str) -> str:
    # The fallback is read as mrkdwn, where &, < and > are control characters.
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped[:MESSAGE_TEXT_MAX] or EMPTY


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

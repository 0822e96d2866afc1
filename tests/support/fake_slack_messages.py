"""What the fake Slack keeps of a message the bot posted, and the Block Kit limits Slack
checks before it accepts one (answering `invalid_blocks` / `msg_too_long` like Slack).

A streamed message (chat.startStream) is a `Posted` too, with its `stream`: its text is
the text streamed so far, so helpers that read `visible` see it as the reader does.
`mentioned` keeps whom a message pinged when it was posted (its `<@U…>` mentions): in a
channel only a new message that mentions a person notifies them; edits (chat.update)
and stream appends notify nobody.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.fake_slack_streams import Stream

Json = dict[str, Any]
MAX_TEXT = 40_000  # chat.postMessage `text`; longer is msg_too_long
MAX_BLOCKS = 50
MAX_MARKDOWN = 12_000  # total text of a message's markdown blocks


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    blocks: list[Json]
    thread_ts: str | None = None
    deleted: bool = False
    stream: Stream | None = None  # set when the message was started as a stream
    updated: bool = False  # chat.update replaced what it shows (a stream's text too)
    mentioned: tuple[str, ...] = ()  # the people its post notified (`mentions`)

    @property
    def streaming(self) -> bool:
        """Whether the message still takes chat.appendStream (started, not stopped or expired)."""
        return self.stream is not None and self.stream.streaming

    @property
    def visible(self) -> str:
        """The text a reader sees: markdown blocks and sections (not the fallback); for a
        stream, the streamed text and its task cards, then the blocks it was stopped with."""
        stream = None if self.updated else self.stream
        parts = stream.shown() if stream is not None else []
        for block in [*stream.blocks, *self.blocks] if stream is not None else self.blocks:
            text = block.get("text")
            parts.append(text.get("text", "") if isinstance(text, dict) else str(text or ""))
            for element in block.get("elements", []):
                parts.append(f"[{(element.get('text') or {}).get('text', '')}]")
        return "\n".join(parts) if parts else self.text


def mentions(args: Json) -> tuple[str, ...]:
    """The users a posted message mentions, in its text or its blocks' mrkdwn."""
    found = re.findall(r"<@([UW][A-Z0-9]+)>", f"{args.get('text') or ''} {blocks_of(args)}")
    return tuple(dict.fromkeys(found))


def blocks_of(args: Json) -> list[Json]:
    blocks = args.get("blocks") or []
    return list(json.loads(blocks) if isinstance(blocks, str) else blocks)


def check_message(args: Json) -> str:
    """Slack's answer to a message over its limits ("" when it is fine)."""
    if len(str(args.get("text") or "")) > MAX_TEXT:
        return "msg_too_long"
    blocks = blocks_of(args)
    if not blocks and not args.get("text"):
        return "no_text"
    return "" if blocks_ok(blocks) else "invalid_blocks"


def blocks_ok(blocks: list[Json]) -> bool:
    if len(blocks) > MAX_BLOCKS:
        return False
    markdown = sum(len(b.get("text", "")) for b in blocks if b.get("type") == "markdown")
    action_ids = [e.get("action_id") for b in blocks for e in b.get("elements", [])]
    if markdown > MAX_MARKDOWN or len(action_ids) != len(set(action_ids)):
        return False
    return all(_block_ok(b) for b in blocks)


def _block_ok(block: Json) -> bool:
    kind = block.get("type")
    if kind == "markdown":
        return bool(block.get("text"))
    if kind == "section":
        text = block.get("text") or {}
        return (
            text.get("type") in ("plain_text", "mrkdwn") and 0 < len(text.get("text", "")) <= 3000
        )
    if kind == "actions":
        elements = block.get("elements") or []
        return 0 < len(elements) <= 25 and all(_button_ok(e) for e in elements)
    return kind in ("context", "divider", "header", "rich_text")


def _button_ok(element: Json) -> bool:
    label = (element.get("text") or {}).get("text", "")
    return (
        element.get("type") == "button"
        and 0 < len(label) <= 75
        and 0 < len(element.get("action_id", "")) <= 255
        and len(element.get("value", "")) <= 2000
    )


def view_ok(view: Json) -> bool:
    """A modal as `views.open` accepts it (api.slack.com/reference/surfaces/views)."""
    labels = [view.get("title")] + [view[k] for k in ("submit", "close") if k in view]
    inputs = [b for b in view.get("blocks") or [] if b.get("type") == "input"]
    return (
        view.get("type") == "modal"
        and 0 < len(str(view.get("callback_id") or "")) <= 255
        and all(_plain_ok(label, 24) for label in labels)
        and len(str(view.get("private_metadata") or "")) <= 3000
        and 0 < len(view.get("blocks") or []) <= 100
        and bool(inputs)
        and all(_input_ok(b) for b in inputs)
    )


def _plain_ok(text: Any, limit: int) -> bool:
    return (
        isinstance(text, dict)
        and text.get("type") == "plain_text"
        and 0 < len(str(text.get("text") or "")) <= limit
    )


def _input_ok(block: Json) -> bool:
    element = block.get("element") or {}
    limit = int(element.get("max_length") or 3000)
    placeholder = element.get("placeholder")
    return (
        _plain_ok(block.get("label"), 2000)
        and element.get("type") == "plain_text_input"
        and 0 < len(str(element.get("action_id") or "")) <= 255
        and limit <= 3000
        and len(str(element.get("initial_value") or "")) <= limit
        and (placeholder is None or _plain_ok(placeholder, 150))
    )


def button_value(blocks: list[Json], action_id: str) -> str:
    for block in blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == action_id:
                return str(element.get("value", ""))
    raise KeyError(action_id)

"""A button's `Form` as a Slack modal, and the modal's submission as a press (pure).

Slack has no reply-to-a-message, so an input dialog's [Answer] opens a modal
(`views.open` with the press's trigger_id, valid for 3 s) holding one
`plain_text_input`. The modal's `private_metadata` carries what the submission
needs to become the press it answers: the conversation key, chat, message and
token. Limits (api.slack.com/reference/surfaces/views, block-kit "input"):
title, submit and close labels 24 characters, input label 2,000, placeholder
150, an input's value 3,000, private_metadata 3,000.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from adapters.malformed import ignore_malformed
from adapters.slack.convert import Converted
from bridge.model import ButtonPress, ChatRef, Inbound, MessageRef, Sender
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from collections.abc import Mapping

    from bridge.model import Form

CALLBACK_ID = "pi_bridge_form"
BLOCK_ID = "pi_bridge_answer"
ACTION_ID = "answer"
TITLE_MAX = 24
LABEL_MAX = 2_000
PLACEHOLDER_MAX = 150
VALUE_MAX = 3_000
METADATA_MAX = 3_000

Json = dict[str, Any]


def modal(form: Form, origin: Inbound) -> Json | None:
    """The modal for `form`, opened by the press `origin`; None when the press cannot
    be carried in `private_metadata` (then the bridge asks for a message instead)."""
    press = origin.press
    if press is None:
        return None
    metadata = json.dumps(
        {
            "key": origin.key,
            "channel": origin.chat.chat_id,
            "thread": origin.chat.thread_id,
            "message": press.message.message_id if press.message else None,
            "token": press.token,
            "press": press.press_id,
        },
        separators=(",", ":"),
    )
    if len(metadata) > METADATA_MAX:
        return None
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "title": _plain(clip(form.title.strip(), TITLE_MAX) or "Your answer"),
        "submit": _plain("Send"),
        "close": _plain("Cancel"),
        "private_metadata": metadata,
        "blocks": [*_note(form), _input(form)],
    }


def _input(form: Form) -> Json:
    element: Json = {
        "type": "plain_text_input",
        "action_id": ACTION_ID,
        "multiline": form.multiline,
        "max_length": VALUE_MAX,
    }
    if form.prefill:
        element["initial_value"] = form.prefill[:VALUE_MAX]
    if form.placeholder:
        element["placeholder"] = _plain(clip(form.placeholder.strip(), PLACEHOLDER_MAX))
    return {
        "type": "input",
        "block_id": BLOCK_ID,
        "label": _plain(clip(form.title.strip(), LABEL_MAX) or "Your answer"),
        "element": element,
    }


def _note(form: Form) -> list[Json]:
    if len(form.prefill) <= VALUE_MAX:
        return []
    note = (
        f"⚠️ The text has {len(form.prefill):,} characters; a Slack form holds "
        f"{VALUE_MAX:,}, so only the start is shown. What you send replaces all of it."
    )
    return [{"type": "context", "elements": [{"type": "plain_text", "text": note}]}]


@ignore_malformed
def from_submission(body: Mapping[str, Any]) -> Converted | None:
    """A `view_submission` of one of the bridge's modals as a press carrying the text."""
    view = body.get("view") or {}
    user = body.get("user") or {}
    if view.get("callback_id") != CALLBACK_ID or not user.get("id"):
        return None
    try:
        meta = json.loads(view.get("private_metadata") or "")
    except (ValueError, RecursionError):  # RecursionError: a forged, deeply nested one
        return None
    if not isinstance(meta, dict) or not meta.get("key") or not meta.get("token"):
        return None
    thread = meta.get("thread") or None
    if thread is not None and not isinstance(thread, str):
        return None  # the bridge writes a thread ts as a string; this is not its own
    chat = ChatRef(str(meta["channel"]), thread)
    message = MessageRef(chat, str(meta["message"])) if meta.get("message") else None
    value = ((view.get("state") or {}).get("values") or {}).get(BLOCK_ID, {}).get(ACTION_ID, {})
    text = str(value.get("value") or "")  # an emptied optional field arrives as null
    press = ButtonPress(str(meta["token"]), str(meta.get("press") or ""), message, text=text)
    sender = Sender(str(user["id"]), str(user.get("username") or user.get("name") or ""))
    event_id = f"view:{view.get('id') or body.get('trigger_id') or ''}"
    return Converted(Inbound(str(meta["key"]), chat, sender, event_id, press=press))


def _plain(text: str) -> Json:
    return {"type": "plain_text", "text": text, "emoji": True}

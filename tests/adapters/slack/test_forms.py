"""A button's form as a Slack modal and its `view_submission` back as a press:
table-driven over `Form`s, with submissions shaped like Slack's own, no I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.slack.forms import (
    ACTION_ID,
    BLOCK_ID,
    CALLBACK_ID,
    VALUE_MAX,
    from_submission,
    modal,
)
from bridge.model import ButtonPress, ChatRef, Form, Inbound, MessageRef, Sender

CHAT = ChatRef("C1", "100.1")
KEY = "slack:T1:C1:100.1"
PRESS = ButtonPress("tok-7", "C1|U1|100.1", MessageRef(CHAT, "100.3"))
ORIGIN = Inbound(KEY, CHAT, Sender("U1"), "action:100.35", press=PRESS)
LONG = "x" * (VALUE_MAX + 10)

MODALS: list[tuple[str, Form, dict[str, Any], str, bool]] = [
    (
        "an input with its placeholder",
        Form("Branch name?", placeholder="feature/…"),
        {"multiline": False, "placeholder": "feature/…"},
        "Branch name?",
        False,
    ),
    (
        "an editor is multiline with its prefill",
        Form("Edit the commit message", prefill="fix: x\n\nbody", multiline=True),
        {"multiline": True, "initial_value": "fix: x\n\nbody"},
        "Edit the commit message",
        False,
    ),
    (
        "a long title is clipped to 24 characters",
        Form("A very long question title that goes on"),
        {"multiline": False},
        "A very long question ti…",
        False,
    ),
    (
        "an oversized prefill is cut, with a note",
        Form("Edit", prefill=LONG, multiline=True),
        {"multiline": True, "initial_value": LONG[:VALUE_MAX]},
        "Edit",
        True,
    ),
    ("an empty title still has one", Form("  "), {"multiline": False}, "Your answer", False),
]


@pytest.mark.parametrize(
    ("form", "element", "title", "noted"), [m[1:] for m in MODALS], ids=[m[0] for m in MODALS]
)
def test_a_form_becomes_a_modal_within_slacks_limits(
    form: Form, element: dict[str, Any], title: str, noted: bool
) -> None:
    view = modal(form, ORIGIN)
    assert view is not None
    assert (view["type"], view["callback_id"]) == ("modal", CALLBACK_ID)
    assert view["title"]["text"] == title
    assert len(view["title"]["text"]) <= 24
    *notes, field = view["blocks"]
    assert (field["type"], field["block_id"]) == ("input", BLOCK_ID)
    shown = {k: v for k, v in field["element"].items() if k in ("multiline", "initial_value")}
    if "placeholder" in field["element"]:
        shown["placeholder"] = field["element"]["placeholder"]["text"]
    assert shown == element
    assert bool(notes) is noted
    if noted:
        assert "only the start is shown" in notes[0]["elements"][0]["text"]
    assert len(view["private_metadata"]) <= 3000


def test_a_press_without_a_button_has_no_modal() -> None:
    assert modal(Form("x"), Inbound(KEY, CHAT, Sender("U1"), "e")) is None


def submission(view: dict[str, Any], value: str | None, user: str = "U1") -> dict[str, Any]:
    """A `view_submission` payload as Slack sends it for `view`."""
    return {
        "type": "view_submission",
        "team": {"id": "T1"},
        "user": {"id": user, "username": "alice"},
        "trigger_id": "trig-1",
        "view": {
            "id": "V123",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {
                "values": {BLOCK_ID: {ACTION_ID: {"type": "plain_text_input", "value": value}}}
            },
        },
    }


@pytest.mark.parametrize(("value", "text"), [("feature/x", "feature/x"), (None, "")])
def test_a_submission_is_the_press_it_answers_carrying_the_text(
    value: str | None, text: str
) -> None:
    view = modal(Form("Branch?"), ORIGIN)
    assert view is not None
    converted = from_submission(submission(view, value))
    assert converted is not None
    inbound = converted.inbound
    assert (inbound.key, inbound.chat, inbound.sender.id) == (KEY, CHAT, "U1")
    assert inbound.press == ButtonPress("tok-7", PRESS.press_id, PRESS.message, text=text)
    assert inbound.event_id == "view:V123"


@pytest.mark.parametrize(
    "change",
    [
        {"callback_id": "someone_elses_modal"},
        {"private_metadata": "not json"},
        {"private_metadata": json.dumps({"key": KEY})},
    ],
    ids=["another callback id", "garbled metadata", "metadata without a token"],
)
def test_other_submissions_are_not_for_the_bridge(change: dict[str, Any]) -> None:
    view = modal(Form("Branch?"), ORIGIN)
    assert view is not None
    body = submission(view, "x")
    body["view"].update(change)
    assert from_submission(body) is None

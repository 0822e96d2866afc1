"""The approval gate's questions (bridge/conversation/approval_questions.py): the gate
asks, the bridge decides, a person answers, and "Always allow" is remembered.

A conversation of real parts (tests/conversation/room.py) whose agent is the
scripted stand-in: it asks as bridge/extensions/approval-gate.ts does (a `select`
titled with the gate's marker and the call as JSON) and logs the answer it gets.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from bridge.approvals.ask import PREFIX
from bridge.conversation.approval_questions import GRANTED
from bridge.model import ChatRef
from bridge.options import ApprovalOptions
from tests.conversation.room import Room, room, room_options
from tests.support.bridge_harness import KEY, OWNER
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import ApprovalMode, BridgeOptions

pytestmark = pytest.mark.anyio

DANGEROUS = "rm -rf build"
QUESTION = "✋ *Approve this"


def gate(opts: BridgeOptions, tool: str, call: str, **arguments: object) -> str:
    """The prompt that makes the stand-in ask as the gate asks about one tool call."""
    asked = {
        "v": 1,
        "toolCallId": call,
        "tool": tool,
        "cwd": str(opts.workspace(KEY)),
        "input": arguments,
        "truncated": False,
    }
    title = PREFIX + json.dumps(asked)
    fields = {"type": "extension_ui_request", "method": "select", "title": title}
    return "dialog " + json.dumps({**fields, "options": ["allow", "always", "deny", "reason"]})


def answered(chat: Room) -> list[object]:
    """The gate's answers, in order."""
    return [c.get("value") for c in chat.got("extension_ui_response")]


def approving(tmp_path: Path, mode: ApprovalMode = "dangerous", **kw: object) -> BridgeOptions:
    return room_options(tmp_path, approvals=ApprovalOptions(mode=mode, **kw))  # type: ignore[arg-type]


DECISIONS = [
    ("a harmless command runs", "dangerous", "bash", {"command": "ls -la"}, False),
    ("a dangerous command is asked about", "dangerous", "bash", {"command": DANGEROUS}, True),
    ("an edit inside the workspace runs", "dangerous", "edit", {"path": "notes.md"}, False),
    ("an edit is asked about under writes", "writes", "edit", {"path": "notes.md"}, True),
    (
        "a write outside the workspace is asked about",
        "dangerous",
        "write",
        {"path": "/etc/x"},
        True,
    ),
    ("any call is asked about under all", "all", "bash", {"command": "ls -la"}, True),
]


@pytest.mark.parametrize(
    ("mode", "tool", "arguments", "asks"),
    [d[1:] for d in DECISIONS],
    ids=[d[0] for d in DECISIONS],
)
async def test_the_bridge_decides_which_calls_a_person_must_approve(
    tmp_path: Path, mode: ApprovalMode, tool: str, arguments: dict[str, object], asks: bool
) -> None:
    opts = approving(tmp_path, mode)
    async with room(opts) as chat:
        chat.say(gate(opts, tool, "call-1", **arguments))
        if asks:
            await chat.shown(QUESTION)
            assert labels(chat) == [
                "✅ Allow once",
                "♾ Always allow",
                "⛔ Deny",
                "💬 Deny with reason…",
            ]
            assert answered(chat) == []
        else:
            await chat.until(lambda: answered(chat) == ["allow"])
            await chat.services.outbox.flush()
            assert chat.find(QUESTION) is None
            assert await chat.store.audit_log(KEY) == []  # nobody decided: nothing to log


def labels(chat: Room) -> list[str]:
    message = chat.find(QUESTION)
    assert message is not None
    return [b.label for row in message.buttons for b in row]


async def test_always_allow_keeps_a_grant_that_lets_the_same_call_through_later(
    tmp_path: Path,
) -> None:
    opts = approving(tmp_path)
    async with room(opts) as chat:
        chat.say(gate(opts, "bash", "call-1", command=DANGEROUS))
        pressed = await chat.press("Always allow", contains=QUESTION)
        assert await chat.answer_of(pressed) == "✓ Always allow"
        await chat.shown("✅ alice chose: Always allow")
        await chat.until(lambda: answered(chat) == ["always"])
        record = chat.conversation.record
        assert record is not None
        assert [grant.by for grant in record.grants] == [OWNER.id]
        stored = await chat.store.get_conversation(KEY)
        assert stored is not None
        assert stored.grants == record.grants  # it outlives the agent and the bridge

        await chat.end_run()
        await chat.idle()
        chat.say(gate(opts, "bash", "call-2", command=DANGEROUS))
        await chat.until(lambda: answered(chat) == ["always", "allow"])
        later, first = await chat.store.audit_log(KEY)  # newest first
        assert (first.user_id, first.choice, first.title) == (
            OWNER.id,
            "Always allow",
            f"bash: {DANGEROUS}",
        )
        assert (later.user_id, later.choice) == (OWNER.id, GRANTED)


async def test_a_denial_with_a_reason_typed_in_the_form_goes_to_the_agent(
    tmp_path: Path,
) -> None:
    opts = approving(tmp_path)
    async with room(opts) as chat:
        chat.say(gate(opts, "bash", "call-1", command=DANGEROUS))
        button = await chat.button("Deny with reason…", contains=QUESTION)
        pressed = chat.press_token(button.token, text="use git clean instead")
        assert await chat.answer_of(pressed) == "✓ Deny with reason “use git clean instead”"
        await chat.until(lambda: answered(chat) == ["deny:use git clean instead"])
        record = chat.conversation.record
        assert record is not None
        assert record.grants == []


class DirectMessaging(RecordingAdapter):
    """A platform where the bot can write to a person directly: their chat is `dm-<id>`."""

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        return ChatRef(f"dm-{user_id}")


async def test_each_approver_gets_a_copy_of_the_question_that_shows_the_answer_too(
    tmp_path: Path,
) -> None:
    opts = room_options(
        tmp_path,
        approvals=ApprovalOptions(mode="dangerous", notify_approvers="dm"),
        approvers=frozenset({"9"}),
    )
    async with room(opts, adapter=DirectMessaging()) as chat:
        chat.say(gate(opts, "bash", "call-1", command=DANGEROUS))
        await chat.shown(QUESTION)
        await chat.until(lambda: any(QUESTION in t for t in chat.adapter.texts("dm-9")))
        (claim, *_) = await chat.store.dialogs_for(KEY)
        assert claim.copies == ["dm-9"]

        await chat.press("Deny", contains=QUESTION)
        await chat.until(lambda: "✅ alice chose: Deny" in chat.adapter.texts("dm-9")[-1])
        copy = chat.adapter.last("dm-9")
        assert copy.buttons == ()

"""A conversation's agent dialogs (bridge/conversation/dialogs.py): claimed in the store
per button, answered at most once by whoever may, closed with who chose what.

Real parts around one conversation (tests/conversation/room.py); its agent is the
scripted stand-in, which opens the dialog and logs the answer it gets.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from bridge.conversation.dialogs import NO_LONGER_ACTIVE, NOT_YOURS, dead_press
from bridge.model import ButtonPress, Sender
from bridge.store.records import DialogRecord
from tests.conversation.room import Room, room, room_options
from tests.support.bridge_harness import CHAT, KEY, OWNER, STRANGER

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

APPROVER = Sender("9", "ann")
DIALOG_TIMEOUT = 600.0


def dialog(method: str, title: str, **fields: object) -> str:
    """A prompt that makes the stand-in open a dialog."""
    return "dialog " + json.dumps(
        {"type": "extension_ui_request", "method": method, "title": title, **fields}
    )


def answers(chat: Room) -> list[dict[str, object]]:
    return chat.got("extension_ui_response")


async def opened(chat: Room, title: str = "Deploy now?") -> None:
    chat.say(dialog("select", title, options=["Yes", "No"]))
    await chat.button("Yes", contains=title)


WHO_MAY_ANSWER = [
    ("the owner", OWNER, True),
    ("a configured approver", APPROVER, True),
    ("an approver named in the record", Sender("8", "bo"), True),
    ("a member of an approving group", Sender("7", "mal", groups=frozenset({"S1"})), True),
    ("anyone else", STRANGER, False),
]


@pytest.mark.parametrize(
    ("sender", "may"), [w[1:] for w in WHO_MAY_ANSWER], ids=[w[0] for w in WHO_MAY_ANSWER]
)
async def test_the_owner_and_the_approvers_may_answer_and_nobody_else(
    tmp_path: Path, sender: Sender, may: bool
) -> None:
    opts = room_options(tmp_path, approvers=frozenset({APPROVER.id, "S1"}))
    async with room(opts) as chat:
        await chat.conversation.save(approvers=["8"])
        assert chat.conversation.dialogs.may_answer(sender) is may


async def test_an_answer_reaches_the_agent_once_and_the_dialog_says_who_chose(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        await opened(chat)
        yes = await chat.button("Yes")
        first = chat.press_token(yes.token)
        assert await chat.answer_of(first) == "✓ Yes"
        closed = await chat.shown("✅ alice chose: Yes")
        assert closed.buttons == ()
        await chat.until(lambda: len(answers(chat)) == 1)
        assert answers(chat)[0]["value"] == "Yes"
        assert await chat.store.dialogs_for(KEY) == []
        (entry,) = await chat.store.audit_log(KEY)
        assert (entry.user_id, entry.choice) == (OWNER.id, "Yes")

        again = chat.press_token(yes.token)
        assert await chat.answer_of(again) == NO_LONGER_ACTIVE
        assert len(answers(chat)) == 1


async def test_a_press_by_someone_who_may_not_answer_is_refused_and_the_dialog_stays_open(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        await opened(chat)
        refused = await chat.press("Yes", STRANGER)
        assert await chat.answer_of(refused) == NOT_YOURS
        assert (refused, NOT_YOURS, True) in chat.adapter.answers  # an alert
        assert len(await chat.store.dialogs_for(KEY)) == 3  # Yes, No, Cancel
        assert answers(chat) == []

        owners = await chat.press("No")
        assert await chat.answer_of(owners) == "✓ No"
        await chat.until(lambda: [a.get("value") for a in answers(chat)] == ["No"])


CLAIMS = [
    ("its own timeout", {"timeout": 5000}, 5.0),
    ("the bridge's without one", {}, DIALOG_TIMEOUT),
    ("the bridge's for a zero timeout", {"timeout": 0}, DIALOG_TIMEOUT),
]


@pytest.mark.parametrize(("fields", "lasts"), [c[1:] for c in CLAIMS], ids=[c[0] for c in CLAIMS])
async def test_each_button_is_claimed_in_the_store_until_the_dialog_expires(
    tmp_path: Path, fields: dict[str, object], lasts: float
) -> None:
    async with room(room_options(tmp_path, dialog_timeout=DIALOG_TIMEOUT)) as chat:
        chat.say(dialog("confirm", "Really?", **fields))
        await chat.button("Yes", contains="Really?")
        message = chat.find("Really?")
        assert message is not None
        claims = await chat.store.dialogs_for(KEY)
        buttons = [b for row in message.buttons for b in row]
        assert [c.token for c in claims] == [b.token for b in buttons]
        assert [c.choice for c in claims] == ["Yes", "No"]
        for claim in claims:
            assert claim.expires_at is not None
            assert claim.expires_at - claim.created_at == pytest.approx(lasts)


async def test_an_input_dialog_is_answered_by_a_reply_once_its_answer_button_asks_for_one(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        chat.say(dialog("input", "Branch name?"))
        await chat.press("Answer", contains="Branch name?")  # a platform without forms
        asking = await chat.shown("Reply to this message")
        assert asking.force_reply

        chat.say("not yours to answer", STRANGER, reply_to=asking.ref.message_id)
        await chat.shown(NOT_YOURS)
        chat.say("feature/x")  # the presser's next message is the answer
        await chat.shown("✅ alice chose: feature/x")
        await chat.until(lambda: [a.get("value") for a in answers(chat)] == ["feature/x"])


async def test_once_its_agent_stopped_a_dialog_can_no_longer_be_answered(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        await opened(chat)
        yes = await chat.button("Yes")
        chat.say("EXIT")  # a steer the stand-in ends on, as a crash would
        await chat.shown("The agent stopped (exit 3)")
        await chat.until(lambda: chat.conversation.agent is None)
        assert await chat.store.dialogs_for(KEY) == []
        late = chat.press_token(yes.token)
        assert await chat.answer_of(late) == NO_LONGER_ACTIVE
        assert answers(chat) == []


async def test_a_press_after_the_agent_was_stopped_retires_its_dialog(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        await opened(chat)
        yes = await chat.button("Yes")
        await chat.conversation.reap()  # on purpose (idle, evicted): no crash to report
        late = chat.press_token(yes.token)
        assert await chat.answer_of(late) == NO_LONGER_ACTIVE
        assert await chat.store.dialogs_for(KEY) == []
        # The agent was told as it stopped (the client cancels what is open); the press
        # after that sent it nothing.
        assert [a.get("cancelled") for a in answers(chat)] == [True]


def claim(token: str, key: str) -> DialogRecord:
    return DialogRecord(
        token=token, key=key, request_id=f"req-{token}", method="select", created_at=0.0
    )


DEAD_PRESSES = [
    ("its own dialog from before a restart is retired", "mine", True),
    ("another conversation's dialog is left alone", "theirs", False),
    ("an unknown token changes nothing", "forged", False),
]


@pytest.mark.parametrize(
    ("token", "retired"), [d[1:] for d in DEAD_PRESSES], ids=[d[0] for d in DEAD_PRESSES]
)
async def test_a_press_on_no_live_button_is_answered_no_longer_active(
    tmp_path: Path, token: str, retired: bool
) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.store.put_dialogs([claim("mine", KEY), claim("theirs", "test:2")])
        before = {c.token for k in (KEY, "test:2") for c in await chat.store.dialogs_for(k)}
        await dead_press(chat.services, KEY, CHAT, ButtonPress(token, "p-dead"))
        assert await chat.answer_of("p-dead") == NO_LONGER_ACTIVE
        after = {c.token for k in (KEY, "test:2") for c in await chat.store.dialogs_for(k)}
        assert before - after == ({token} if retired else set())

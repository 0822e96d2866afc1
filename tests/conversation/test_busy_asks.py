"""Messages that wait (bridge/conversation/busy_asks.py): asked about while the agent
works (busy policy "ask"), or held while it compacts and sent on once it is done.

`Waiting` on its own, then in a conversation of real parts (tests/conversation/room.py)
whose agent is the scripted stand-in: what the chat asks and what the agent gets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.busy_asks import Asked, Held, Waiting
from bridge.conversation.dialogs import NO_LONGER_ACTIVE
from bridge.conversation.routing import FollowUp, Steer
from bridge.model import Image
from tests.conversation.room import Room, room, room_options

if TYPE_CHECKING:
    from pathlib import Path

PNG = Image(b"\x89PNG", "image/png")


def asked(text: str) -> Asked:
    return Asked(text, (), f"m-{text}")


def test_a_busy_question_is_answered_once() -> None:
    waiting = Waiting()
    waiting.ask("q1", asked("one"))
    waiting.ask("q2", asked("two"))
    assert waiting.answered("q2") == asked("two")
    assert waiting.answered("q2") is None
    assert waiting.answered("q3") is None
    assert waiting.answered("q1") == asked("one")


def test_forgetting_the_questions_keeps_the_held_messages() -> None:
    waiting = Waiting()
    waiting.ask("q1", asked("one"))
    waiting.hold(Steer("held"), "m1")
    waiting.forget_questions()
    assert waiting.answered("q1") is None
    assert waiting.holding
    assert waiting.release() == [Held(Steer("held"), "m1")]


def test_held_messages_are_released_once_in_the_order_they_came() -> None:
    waiting = Waiting()
    assert not waiting.holding
    waiting.hold(Steer("first"), "m1")
    waiting.hold(FollowUp("second"), None)
    assert waiting.holding
    assert waiting.release() == [Held(Steer("first"), "m1"), Held(FollowUp("second"), None)]
    assert not waiting.holding
    assert waiting.release() == []


AS_CHOSEN = [
    ("now: a steer", False, Steer("tabs", (PNG,))),
    ("after this run: a follow-up", True, FollowUp("tabs", (PNG,))),
]


@pytest.mark.parametrize(
    ("later", "intent"), [c[1:] for c in AS_CHOSEN], ids=[c[0] for c in AS_CHOSEN]
)
def test_an_asked_message_goes_in_as_the_answer_chose(
    later: bool, intent: Steer | FollowUp
) -> None:
    assert Asked("tabs", (PNG,), "m1").as_intent(later) == intent


# --- in a conversation ------------------------------------------------------------------


def compacting(chat: Room) -> bool:
    agent = chat.conversation.agent
    return agent is not None and agent.state.compacting


def texts(chat: Room, kind: str) -> list[object]:
    return [c.get("message") for c in chat.got(kind)]


CHOICES = [
    ("steer now", "Steer now", "Sent now.", "➡️ sent now", "steer"),
    (
        "after this run",
        "After this run",
        "Queued for after this run.",
        "⏭ after this run",
        "follow_up",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("label", "toast", "outcome", "kind"), [c[1:] for c in CHOICES], ids=[c[0] for c in CHOICES]
)
async def test_under_policy_ask_a_message_to_a_busy_agent_goes_in_as_chosen_once(
    tmp_path: Path, label: str, toast: str, outcome: str, kind: str
) -> None:
    async with room(room_options(tmp_path)) as chat:
        settings = chat.conversation.renderer.settings.model_copy(update={"busy_policy": "ask"})
        await chat.conversation.set_settings(settings)
        await chat.working()
        chat.say("use tabs")
        await chat.shown("The agent is busy. Send “use tabs” now, or after this run?")
        assert texts(chat, "steer") == texts(chat, "follow_up") == []

        button = await chat.button(label)
        first = chat.press_token(button.token)
        assert await chat.answer_of(first) == toast
        closed = await chat.shown(outcome)
        assert closed.buttons == ()
        await chat.until(lambda: texts(chat, kind) == ["use tabs"])

        again = chat.press_token(button.token)
        assert await chat.answer_of(again) == NO_LONGER_ACTIVE
        assert texts(chat, "steer") + texts(chat, "follow_up") == ["use tabs"]


@pytest.mark.anyio
async def test_a_message_sent_while_the_agent_compacts_is_held_and_goes_in_when_it_is_done(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        chat.say("COMPACT")  # the stand-in compacts for a moment
        await chat.until(lambda: compacting(chat))
        chat.say("and add tests")
        await chat.shown("The agent is compacting its context")
        assert "and add tests" not in texts(chat, "steer")
        await chat.until(lambda: "and add tests" in texts(chat, "steer"))
        assert not chat.conversation.waiting.holding


@pytest.mark.anyio
async def test_a_stop_drops_what_is_held_for_a_compaction(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        chat.say("COMPACT")
        await chat.until(lambda: compacting(chat))
        chat.say("and add tests")
        await chat.shown("The agent is compacting its context")
        chat.say("/stop")
        await chat.until(lambda: not chat.conversation.busy)
        await chat.until(lambda: not compacting(chat))
        # Had it been kept, it would go in before this, the intake being in order.
        chat.say("next task")
        await chat.until(lambda: "next task" in texts(chat, "prompt"))
        assert "and add tests" not in texts(chat, "steer") + texts(chat, "prompt")
        assert not chat.conversation.waiting.holding

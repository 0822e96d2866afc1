"""Messages a busy agent has not taken yet (bridge/conversation/pending.py): queued,
shown with the buttons that can still change them, withdrawn, taken.

A conversation of real parts (tests/conversation/room.py) whose agent is the
scripted stand-in, as 0.87.1 (`clear_queue`: what waits in its queue can be given
back) and as 0.73.1 (it cannot: the bridge holds follow-ups itself). The pure model
of the same has its own tests (test_pending_model.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.dialogs import NOT_YOURS
from bridge.conversation.pending import CLEARED, DROPPED, TAKEN
from tests.conversation.room import Room, room, room_options
from tests.support.bridge_harness import STRANGER

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

FOLLOWING = "⏭ waiting for the end of the run"
STEERING = "➡️ waiting for the next step"


def sent(chat: Room, kind: str) -> list[object]:
    """The texts the agent was sent as `kind`, in order."""
    return [c.get("message") for c in chat.got(kind)]


def queue_of(chat: Room) -> tuple[list[str], list[str]]:
    """The agent's own queue, as its last `queue_update` listed it."""
    agent = chat.conversation.agent
    assert agent is not None
    return list(agent.state.steering), list(agent.state.follow_up)


def labels(chat: Room, text: str) -> list[str]:
    message = chat.find(text)
    assert message is not None
    return [b.label for row in message.buttons for b in row]


# --- an agent that gives its queue back (clear_queue) --------------------------------------


async def test_a_follow_up_waits_with_its_buttons_until_the_run_takes_it(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        chat.say(">> then run the tests")
        await chat.shown(f"{FOLLOWING}: “then run the tests”")
        assert labels(chat, "then run the tests") == ["➡️ Steer now", "✖ Cancel"]
        assert sent(chat, "follow_up") == ["then run the tests"]

        await chat.end_run()
        taken = await chat.shown(f"{TAKEN}: “then run the tests”")
        assert taken.buttons == ()


async def test_a_cancelled_follow_up_leaves_the_agents_queue_and_the_others_go_back_in_order(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        for text in (">> one", ">> two", ">> three"):
            chat.say(text)
        await chat.until(lambda: queue_of(chat) == ([], ["one", "two", "three"]))

        pressed = await chat.press("Cancel", contains="“two”")
        assert await chat.answer_of(pressed) == "Cancelled."
        await chat.shown("✖ cancelled by alice: “two”")
        await chat.until(lambda: queue_of(chat) == ([], ["one", "three"]))
        assert len(chat.got("clear_queue")) == 1


async def test_steer_now_turns_a_waiting_follow_up_into_a_steer(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        chat.say(">> use tabs")
        pressed = await chat.press("Steer now", contains="use tabs")
        assert await chat.answer_of(pressed) == "Sent now."
        await chat.until(lambda: queue_of(chat) == (["use tabs"], []))
        await chat.shown(f"{STEERING}: “use tabs”")
        assert labels(chat, "use tabs") == [
            "✖ Cancel"
        ]  # no further to push: it can still be withdrawn


async def test_only_the_owner_or_an_approver_changes_a_waiting_message(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        chat.say(">> use tabs")
        pressed = await chat.press("Cancel", STRANGER, contains="use tabs")
        assert await chat.answer_of(pressed) == NOT_YOURS
        assert chat.got("clear_queue") == []
        assert queue_of(chat) == ([], ["use tabs"])


async def test_queue_lists_what_waits_and_clears_it(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        chat.say("/queue")
        await chat.shown("Nothing is queued.")
        await chat.working()
        chat.say(">> one")
        chat.say("two")  # busy: a steer
        await chat.until(lambda: queue_of(chat) == (["two"], ["one"]))

        chat.say("/queue")
        listed = await chat.shown("Waiting:")
        assert listed.text.splitlines()[1:] == [f"1. {FOLLOWING}: “one”", f"2. {STEERING}: “two”"]
        assert labels(chat, "Waiting:") == ["➡️ Steer now 1", "✖ Cancel 1", "✖ Cancel 2"]

        chat.say("/queue clear")
        await chat.shown("🧹 Queue cleared.")
        await chat.shown(f"{CLEARED}: “one”")
        await chat.shown(f"{CLEARED}: “two”")
        assert queue_of(chat) == ([], [])


async def test_what_waits_when_the_agent_stops_is_closed_as_not_sent(tmp_path: Path) -> None:
    async with room(room_options(tmp_path)) as chat:
        await chat.working()
        chat.say(">> then run the tests")
        await chat.shown("then run the tests")
        agent = chat.conversation.agent
        assert agent is not None
        await agent.steer("EXIT")  # the stand-in ends, as a crash would
        await chat.shown(f"{DROPPED}: “then run the tests”")


# --- an agent that cannot give its queue back (0.73.1) ------------------------------------


async def test_a_follow_up_is_held_by_the_bridge_and_starts_the_next_run(tmp_path: Path) -> None:
    async with room(room_options(tmp_path, profile="pi")) as chat:
        await chat.working()
        chat.say(">> then run the tests")
        await chat.shown(f"{FOLLOWING}: “then run the tests”")
        assert labels(chat, "then run the tests") == ["➡️ Steer now", "✖ Cancel"]
        assert sent(chat, "follow_up") == []

        await chat.end_run()
        await chat.shown(f"{TAKEN}: “then run the tests”")
        await chat.until(
            lambda: sent(chat, "prompt") == ["start a long task", "then run the tests"]
        )


async def test_a_cancelled_held_follow_up_never_reaches_the_agent(tmp_path: Path) -> None:
    async with room(room_options(tmp_path, profile="pi")) as chat:
        await chat.working()
        chat.say(">> then run the tests")
        pressed = await chat.press("Cancel", contains="then run the tests")
        assert await chat.answer_of(pressed) == "Cancelled."
        await chat.shown("✖ cancelled by alice: “then run the tests”")
        await chat.end_run()
        await chat.idle()
        chat.say("next task")  # the intake is in order: anything held would be in first
        await chat.until(lambda: "next task" in sent(chat, "prompt"))
        assert sent(chat, "prompt") == ["start a long task", "next task"]
        assert sent(chat, "follow_up") == []


async def test_a_steer_the_agent_cannot_give_back_goes_in_without_buttons(tmp_path: Path) -> None:
    async with room(room_options(tmp_path, profile="pi")) as chat:
        await chat.working()
        chat.say("use tabs")
        await chat.until(lambda: sent(chat, "steer") == ["use tabs"])
        await chat.services.outbox.flush()
        assert chat.find("use tabs") is None  # its 👀 says it reached the run

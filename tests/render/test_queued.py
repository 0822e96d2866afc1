"""Messages waiting in the agent's queue, as the chat shows them (render/queued.py): one
short message with its buttons while a press can still change it, edited once it stops
waiting, and the /queue list kept current (pure: the renderer's own chat stand-in)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.render import QueueChoice
from bridge.render.queued import quote
from bridge.rpc.signals import RunEnded, RunStarted
from tests.render.test_renderer import Session, event, reactions, user

if TYPE_CHECKING:
    from bridge.rpc.agent_event import AgentEvent

STEER_NOW, CANCEL = "➡️ Steer now", "✖ Cancel"


def labels(session: Session, slot: str) -> list[str]:
    return [b.label for row in session.chat.messages[slot].buttons for b in row]


def tokens(session: Session, slot: str) -> list[str]:
    return [b.token for row in session.chat.messages[slot].buttons for b in row]


def test_a_waiting_follow_up_shows_steer_now_and_cancel_on_one_silent_message() -> None:
    session = Session()
    view = session.renderer.queued
    session.do(view.waiting("q1", "run the tests\nand more", False, ("steer_now", "cancel")))
    shown = session.chat.messages["queued:q1"]
    assert shown.text == "⏭ waiting for the end of the run: “run the tests …”"
    assert shown.silent
    assert labels(session, "queued:q1") == [STEER_NOW, CANCEL]
    steer_now, cancel = tokens(session, "queued:q1")
    assert session.renderer.pressed(steer_now) == QueueChoice("q1", "steer_now")
    assert session.renderer.pressed(cancel) == QueueChoice("q1", "cancel")


def test_a_steer_without_buttons_gets_no_message_of_its_own() -> None:
    session = Session()
    assert session.do(session.renderer.queued.waiting("q1", "now", True, ())) == []


def test_a_pushed_follow_up_becomes_a_steer_and_its_old_buttons_stop_resolving() -> None:
    session = Session()
    view = session.renderer.queued
    session.do(view.waiting("q1", "later", False, ("steer_now", "cancel")))
    old = tokens(session, "queued:q1")
    session.do(view.waiting("q1", "later", True, ("cancel",)))
    assert session.chat.messages["queued:q1"].text.startswith("➡️ waiting for the next step")
    assert labels(session, "queued:q1") == [CANCEL]
    assert [session.renderer.pressed(t) for t in old] == [None, None]
    session.do(view.waiting("q1", "later", True, ()))  # where a steer cannot be withdrawn
    assert session.chat.messages["queued:q1"].buttons == ()


def test_a_message_that_stops_waiting_says_how_and_its_buttons_go() -> None:
    session = Session()
    view = session.renderer.queued
    session.do(view.waiting("q1", "later", False, ("steer_now", "cancel")))
    live = tokens(session, "queued:q1")
    ops = session.do(view.close("q1", "later", "✖ cancelled by Alice", "m7"))
    shown = session.chat.messages["queued:q1"]
    assert (shown.text, shown.buttons) == ("✖ cancelled by Alice: “later”", ())
    assert [session.renderer.pressed(t) for t in live] == [None, None]
    assert reactions(ops) == [("m7", "failed")]  # withdrawn: it will not run


def test_a_withdrawn_message_no_longer_rides_in_the_run() -> None:
    session = Session()
    session.do(session.renderer.working_on("m1"))
    session.do(session.renderer.joined("m2", "later"))
    session.do(session.renderer.queued.close("q1", "later", "✖ cancelled by Alice", "m2"))
    ops = session.feed(*_run_ended())
    assert ("m2", "done") not in reactions(ops)
    ops = session.feed(*_run_ended())  # nor is it named as lost when the next run ends
    assert not any("Not delivered" in m.text for m in session.chat.messages.values())
    assert ("m2", "failed") not in reactions(ops)


def _run_ended() -> list[AgentEvent]:
    return [
        RunStarted(),
        event(type="agent_start"),
        user("go"),
        event(type="agent_end"),
        RunEnded(),
    ]


def test_the_queue_list_shows_every_waiting_message_and_follows_them() -> None:
    session = Session()
    view = session.renderer.queued
    session.do(view.waiting("q1", "first", False, ("steer_now", "cancel")))
    session.do(view.waiting("q2", "second", True, ()))
    session.do(view.listing(["q1", "q2"]))
    [slot] = session.chat.slots("queue:")
    listed = session.chat.messages[slot]
    assert listed.text == (
        "Waiting:\n"
        "1. ⏭ waiting for the end of the run: “first”\n"
        "2. ➡️ waiting for the next step: “second”"
    )
    assert labels(session, slot) == [f"{STEER_NOW} 1", f"{CANCEL} 1"]
    assert tokens(session, slot) == tokens(session, "queued:q1")  # the same choices
    session.do(view.close("q1", "first", "✔ taken by the agent"))
    listed = session.chat.messages[slot]
    assert listed.text.splitlines()[1] == "1. ✔ taken by the agent: “first”"
    assert listed.buttons == ()


def test_a_new_queue_list_takes_the_buttons_off_the_old_one() -> None:
    session = Session()
    view = session.renderer.queued
    session.do(view.waiting("q1", "first", False, ("steer_now", "cancel")))
    session.do(view.listing(["q1"]))
    session.do(view.listing(["q1"]))
    old, new = session.chat.slots("queue:")
    assert session.chat.messages[old].buttons == ()
    assert labels(session, new) == [f"{STEER_NOW} 1", f"{CANCEL} 1"]


def test_a_message_is_quoted_on_one_clipped_line_or_named_as_a_picture() -> None:
    assert quote("one\ntwo") == "“one …”"
    assert len(quote("x" * 500)) == 102
    assert quote("  ") == "a picture"

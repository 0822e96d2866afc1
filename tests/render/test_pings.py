"""Pings (bridge/render/pings.py): which of a conversation's messages notify, and whom.
Plain calls of the pure functions, and the renderer fed a run."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.model import Mention, NotifySettings, Send
from bridge.render.pings import end_ping, question_ping, summary
from bridge.rpc.content import AssistantMessage
from bridge.rpc.signals import RunEnded, RunStarted
from tests.render.test_renderer import Session, answer, assistant, event, tool_end, tool_start, ui

ALICE = Mention("42", "Alice")
DONE = "✅ done · 2 min · 5 tools"


def said(text: str) -> AssistantMessage:
    return AssistantMessage.model_validate(assistant(text))


@pytest.mark.parametrize(
    ("notify", "person", "took", "outcome", "last", "expected"),
    [
        pytest.param(
            NotifySettings(), ALICE, 120, DONE, said("Built it."), f"{DONE}: Built it.", id="done"
        ),
        pytest.param(NotifySettings(), ALICE, 29.9, DONE, said("Built it."), None, id="quick"),
        pytest.param(NotifySettings(quiet_under=0), ALICE, 0.5, DONE, None, DONE, id="no-answer"),
        pytest.param(NotifySettings(done=False), ALICE, 120, DONE, said("x"), None, id="off"),
        pytest.param(NotifySettings(), None, 120, DONE, said("x"), None, id="nobody"),
        pytest.param(
            NotifySettings(),
            ALICE,
            60,
            "⚠️ failed · 1 min: boom",
            said("x"),
            "⚠️ failed · 1 min: boom",
            id="failed",
        ),
        pytest.param(
            NotifySettings(),
            ALICE,
            60,
            "⏹ stopped · 1 min",
            None,
            "⏹ stopped · 1 min",
            id="stopped",
        ),
    ],
)
def test_the_end_of_a_run_pings_its_person_unless_told_not_to(
    notify: NotifySettings,
    person: Mention | None,
    took: float,
    outcome: str,
    last: AssistantMessage | None,
    expected: str | None,
) -> None:
    ops = end_ping(notify, person, run=3, took=took, outcome=outcome, last=last)
    if expected is None:
        assert ops == []
    else:
        assert ops == [Send("ping:3", expected, ping=person)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("\n\n  \n## Done\n\nmore", "Done"),
        ("first line\nsecond", "first line"),
        ("x" * 500, "x" * 119 + "…"),
    ],
)
def test_the_summary_is_the_answers_first_line_clipped(text: str, expected: str) -> None:
    assert summary(said(text)) == expected


@pytest.mark.parametrize(
    ("notify", "expected"),
    [(NotifySettings(), ALICE), (NotifySettings(questions=False), None)],
)
def test_a_question_pings_as_questions_says(notify: NotifySettings, expected: Any) -> None:
    assert question_ping(notify, ALICE) == expected


def run_with_a_question(session: Session, took: float) -> list[Send]:
    sends: list[Send] = []
    sends += [
        o for o in session.do(session.renderer.working_on("m1", ALICE)) if isinstance(o, Send)
    ]
    ops = session.feed(RunStarted(), event(type="agent_start"), tool_start("c1", command="ls"))
    ops += session.feed(ui("confirm", title="Go on?", message="sure?"), tool_end("c1", "a\nb"))
    ops += session.feed(*answer("All listed.\nDetails follow."))
    session.now += took
    ops += session.feed(event(type="agent_end", messages=[]), RunEnded())
    return sends + [o for o in ops if isinstance(o, Send)]


def test_in_a_long_run_only_the_question_and_the_end_ping_and_everything_else_is_quiet() -> None:
    sends = run_with_a_question(Session(), took=45)
    pinging = [(s.slot, s.ping) for s in sends if s.ping is not None]
    assert pinging == [("dialog:req-1", ALICE), ("ping:1", ALICE)]
    [end] = [s for s in sends if s.slot == "ping:1"]
    assert end.text.startswith("✅ done · ")
    assert " · 1 tool" in end.text  # the final line, then the answer's first line
    assert end.text.endswith(": All listed.")
    assert {s.slot.split(":")[0] for s in sends} >= {"status", "tool", "text", "dialog"}


def test_a_quick_run_ends_without_a_ping_and_settings_can_silence_the_question() -> None:
    sends = run_with_a_question(Session(notify=NotifySettings(questions=False)), took=1)
    assert [s for s in sends if s.ping is not None] == []

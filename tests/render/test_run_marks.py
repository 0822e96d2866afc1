"""The renderer marks the ops of a run for the outbox's run streams (outbox/runs.py).

Inside a run, text and tool ops carry the run ("run:N"); in verbosity "all" a tool
call's ops carry its `Task` card (id, title, status, a short output tail); the run's
final status op, on a normal end and on an interrupt, carries `run_over`. Outside a
run, and in the other verbosities, nothing is marked. Pure: the renderer is driven
with decoded agent events on a fake clock (tests/render/test_renderer.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pytest

from bridge.model import ConversationSettings, Edit, Send, Task
from bridge.render.tools import TASK_TEXT
from bridge.rpc.signals import AgentGone, RunEnded, RunStarted
from tests.render.test_renderer import (
    Session,
    answer,
    event,
    one_run,
    tool_end,
    tool_start,
    tool_update,
)

if TYPE_CHECKING:
    from bridge.model import Op, TaskStatus, Verbosity
    from bridge.rpc.agent_event import AgentEvent

Ending = Literal["agent_end", "interrupt", "agent gone"]


def marked(ops: list[Op], prefix: str = "") -> list[Send | Edit]:
    """The Sends and Edits of `ops` whose slot starts with `prefix`."""
    return [op for op in ops if isinstance(op, Send | Edit) and op.slot.startswith(prefix)]


def run_of(session: Session, *events: AgentEvent, ending: Ending = "agent_end") -> list[Op]:
    """The ops of one run of `events`, ended as `ending` says; a tool's events 1.5 s
    apart, past the edit interval, so each shows."""
    ops = session.feed(RunStarted(), event(type="agent_start"), *events, step=1.5)
    if ending == "agent_end":
        return ops + session.feed(event(type="agent_end", messages=[]), RunEnded())
    if ending == "agent gone":
        return ops + session.feed(AgentGone(1, "boom"))
    return ops + session.do(session.renderer.interrupt("bridge stopped"))


# --- text ---------------------------------------------------------------------------------


def test_the_text_of_each_run_carries_its_run() -> None:
    session = Session()
    first = session.feed(RunStarted(), event(type="agent_start"), *answer("hello"))
    first += session.feed(event(type="agent_end", messages=[]), RunEnded())
    second = session.feed(RunStarted(), event(type="agent_start"), *answer("again"))
    assert [op.run for op in marked(first, "text:")] == ["run:1", "run:1"]  # draft, final
    assert {op.run for op in marked(second, "text:")} == {"run:2"}
    assert not any(op.task or op.run_over for op in marked(first + second, "text:"))


def test_text_outside_a_run_carries_no_run() -> None:
    session = Session()
    ops = session.feed(*answer("a notice of the agent's own"))
    texts = marked(ops, "text:")
    assert texts
    assert [op.run for op in texts] == [""] * len(texts)


# --- tool calls as task cards ------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    events: list[AgentEvent]  # inside a run, after agent_start
    ending: Ending
    cards: list[tuple[TaskStatus, str]]  # (status, output) of each op of tool:c1


CASES = [
    Case(
        "started, then ended well",
        [tool_start("c1", command="ls -la"), tool_end("c1", "a\nb")],
        "agent_end",
        [("in_progress", ""), ("complete", "a\nb")],
    ),
    Case(
        "updated while it runs",
        [tool_start("c1", command="ls -la"), tool_update("c1", "a"), tool_end("c1", "a\nb")],
        "agent_end",
        [("in_progress", ""), ("in_progress", "a"), ("complete", "a\nb")],
    ),
    Case(
        "ended in error",
        [tool_start("c1", command="ls -la"), tool_end("c1", "no such file", error=True)],
        "agent_end",
        [("in_progress", ""), ("error", "no such file")],
    ),
    Case(
        "cut off by the run's end",
        [tool_start("c1", command="ls -la"), tool_update("c1", "a")],
        "agent_end",
        [("in_progress", ""), ("in_progress", "a"), ("error", "a")],
    ),
    Case(
        "cut off by an interrupt",
        [tool_start("c1", command="ls -la")],
        "interrupt",
        [("in_progress", ""), ("error", "interrupted")],
    ),
    Case(
        "cut off by the agent's exit",
        [tool_start("c1", command="ls -la")],
        "agent gone",
        [("in_progress", ""), ("error", "interrupted")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_tool_call_in_a_run_carries_its_card_as_it_runs_and_ends(case: Case) -> None:
    ops = marked(run_of(Session(), *case.events, ending=case.ending), "tool:c1")
    assert [op.task for op in ops] == [
        Task("c1", "bash ls -la", status, output) for status, output in case.cards
    ]
    assert [op.run for op in ops] == ["run:1"] * len(case.cards)
    assert not any(op.run_over for op in ops)


@pytest.mark.parametrize("verbosity", ["compact", "off"])
def test_only_verbosity_all_shows_tool_calls_as_cards(verbosity: Verbosity) -> None:
    session = Session(settings=ConversationSettings(verbosity=verbosity))
    events = [tool_start("c1", command="ls"), tool_update("c1", "a"), tool_end("c1", "a")]
    ops = run_of(session, *events, *answer("done"))
    assert [op for op in marked(ops) if op.task is not None] == []
    lists = marked(ops, "tools:")
    assert bool(lists) is (verbosity == "compact")
    assert marked(ops, "tool:") == []


def test_a_tool_call_outside_a_run_carries_no_card() -> None:
    session = Session()
    ops = session.feed(tool_start("c1", command="ls"), tool_end("c1", "a"))
    tools = marked(ops, "tool:c1")
    assert len(tools) == 2
    assert [(op.run, op.task) for op in tools] == [("", None), ("", None)]


def test_a_card_clips_a_long_title_and_keeps_a_short_tail_of_the_output() -> None:
    session = Session()
    long_name = "t" * 300
    lines = "\n".join(f"line {n}" for n in range(10))
    ops = run_of(
        session,
        tool_start("c1", long_name, x="y" * 400),
        tool_update("c1", "z" * 1000, long_name),
        tool_end("c1", lines, long_name),
    )
    tasks = [op.task for op in marked(ops, "tool:c1") if op.task is not None]
    assert [t.status for t in tasks] == ["in_progress", "in_progress", "complete"]
    for task in tasks:
        assert task.title == "t" * (TASK_TEXT - 1) + "…"
        assert len(task.title) <= TASK_TEXT
        assert len(task.output) <= TASK_TEXT
    assert tasks[1].output == "…" + "z" * (TASK_TEXT - 30 - 1)
    # The last three lines, under a note of how many were left out.
    assert tasks[2].output == "… 7 more lines\nline 7\nline 8\nline 9"


# --- the end of a run -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ending", "final"),
    [
        ("agent_end", "✅ done"),
        ("interrupt", "⚠️ interrupted"),
        ("agent gone", "⚠️ interrupted"),
    ],
)
def test_the_final_status_of_a_run_ends_its_stream(ending: Ending, final: str) -> None:
    session = Session()
    events = [tool_start("c1", command="ls"), *answer("all clean")]
    ops = run_of(session, *events, ending=ending)
    over = [op for op in marked(ops) if op.run_over]
    assert len(over) == 1
    [last] = over
    assert (last.slot, last.run, last.buttons) == ("status:1", "run:1", ())
    assert last.text.startswith(final)
    in_run = [op for op in marked(ops) if op.run == "run:1"]
    assert in_run[-1] is last  # nothing of the run follows its end
    opening = marked(ops, "status:1")[0]
    assert isinstance(opening, Send)
    assert (opening.run, opening.run_over) == ("", False)  # the live status is no part


def test_the_next_run_ends_its_own_stream() -> None:
    session = Session()
    one_run(session, *answer("one"))
    ops = run_of(session, *answer("two"))
    [over] = [op for op in marked(ops) if op.run_over]
    assert (over.slot, over.run) == ("status:2", "run:2")

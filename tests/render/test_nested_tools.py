"""Nested tool calls (pi 1.x `ctx.executeTool()`, `parentToolCallId`) in the renderer.

A call another tool made is a sub-line of its root call's message, a sub-step of its
task card and a count on its compact line; never a message of its own. A root with
hundreds of children stays one message within each platform's limit (with that
platform's real formatter), its edits paced like any tool's; a child whose root is
unknown shows under a placeholder the root's own events then name. Pure: decoded agent
events on a fake clock (tests/render/test_renderer.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from adapters.discord.format import format_markdown as discord_format
from adapters.slack.format import format_markdown as slack_format
from adapters.telegram.format import format_markdown as telegram_format
from adapters.telegram.format import utf16_len
from bridge.model import ConversationSettings, Edit, PlatformLimits, Send
from bridge.render import Renderer
from bridge.render.nested import Child, Children, sub_lines
from bridge.render.tools import TASK_TEXT
from bridge.rpc.signals import RunEnded, RunStarted
from tests.render.test_renderer import Chat, Session, event, tool_end, tool_start

if TYPE_CHECKING:
    from bridge.model import Op, Verbosity
    from bridge.platform import Formatter
    from bridge.rpc.agent_event import AgentEvent


def nested_start(call: str, parent: str, name: str = "read", **args: Any) -> AgentEvent:
    return event(
        type="tool_execution_start",
        toolCallId=call,
        toolName=name,
        args=args,
        parentToolCallId=parent,
    )


def nested_update(call: str, parent: str, output: str, name: str = "read") -> AgentEvent:
    result = {"content": [{"type": "text", "text": output}]}
    return event(
        type="tool_execution_update",
        toolCallId=call,
        toolName=name,
        args={},
        partialResult=result,
        parentToolCallId=parent,
    )


def nested_end(
    call: str, parent: str, name: str = "read", error: bool = False, ms: int | None = None
) -> AgentEvent:
    result = {"content": [{"type": "text", "text": "x"}]}
    timing = {} if ms is None else {"durationMs": ms}
    return event(
        type="tool_execution_end",
        toolCallId=call,
        toolName=name,
        result=result,
        isError=error,
        parentToolCallId=parent,
        **timing,
    )


def children(parent: str, n: int, fail_every: int = 0) -> list[AgentEvent]:
    """`n` nested calls of `parent`, one after another, every `fail_every`th failing."""
    events = []
    for i in range(1, n + 1):
        call = f"{parent}/{i}"
        failed = bool(fail_every) and i % fail_every == 0
        events += [
            nested_start(call, parent, path=f"src/file_{i}.py"),
            nested_end(call, parent, error=failed, ms=3 * i),
        ]
    return events


def in_run(session: Session, *events: AgentEvent, step: float = 0.05) -> list[Op]:
    ops = session.feed(RunStarted(), event(type="agent_start"), *events, step=step)
    return ops + session.feed(event(type="agent_end", messages=[]), RunEnded())


def script(call: str = "p") -> AgentEvent:
    return tool_start(call, "fanout", count=3)


# --- the event --------------------------------------------------------------------------------


def test_the_parent_of_a_nested_call_is_decoded_on_all_three_events() -> None:
    events = [nested_start("p/1", "p"), nested_update("p/1", "p", "o"), nested_end("p/1", "p")]
    assert [getattr(e, "parentToolCallId", None) for e in events] == ["p", "p", "p"]
    assert getattr(tool_start("p"), "parentToolCallId", "missing") is None


# --- verbosity ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    verbosity: Verbosity
    tool_slots: list[str]
    list_slots: list[str]
    text_has: list[str]  # in the only tool message or list, "" none


SHOWN = [
    Shown(
        "all",
        ["tool:p"],
        [],
        [
            "✅ fanout",
            "↳ ✓ read  `a.txt` · 12 ms",
            "↳ ✗ bash  `false` · 1.5 s",
            "↳ ✓ read  `b.txt`",
        ],
    ),
    Shown("compact", [], ["tools:1"], ['🔧 fanout  `{"count":3}` ✅', "3 nested (2 ✓, 1 ✗)"]),
    Shown("off", [], [], []),
]


@pytest.mark.parametrize("case", SHOWN, ids=lambda c: c.verbosity)
def test_nested_calls_show_inside_their_parent_by_verbosity(case: Shown) -> None:
    session = Session(settings=ConversationSettings(verbosity=case.verbosity))
    in_run(
        session,
        script(),
        nested_start("p/1", "p", path="a.txt"),
        nested_end("p/1", "p", ms=12),
        nested_start("p/2", "p", "bash", command="false"),
        nested_end("p/2", "p", "bash", error=True, ms=1500),
        nested_start("p/3", "p", path="b.txt"),
        nested_end("p/3", "p"),
        tool_end("p", "fanned out", name="fanout"),
    )
    assert session.chat.slots("tool:") == case.tool_slots
    assert session.chat.slots("tools:") == case.list_slots
    shown = [session.chat.text(s) for s in case.tool_slots + case.list_slots]
    for part in case.text_has:
        assert part in shown[0], shown
    # The status counts the model's calls, not the calls they made.
    assert "1 tool" in session.chat.text("status:1")
    assert "4 tools" not in session.chat.text("status:1")


def test_a_nested_call_of_a_nested_call_shows_in_the_root_message() -> None:
    session = Session()
    in_run(
        session,
        script(),
        nested_start("p/1", "p", "codemode", code="x"),
        nested_start("p/1/1", "p/1", path="deep.txt"),
        nested_end("p/1/1", "p/1"),
        nested_end("p/1", "p", "codemode"),
        tool_end("p", "ok", name="fanout"),
    )
    assert session.chat.slots("tool:") == ["tool:p"]
    text = session.chat.text("tool:p")
    assert "↳ ✓ codemode" in text
    assert "↳ ✓ read  `deep.txt`" in text


def test_a_running_child_shows_as_running_and_its_output_stays_out() -> None:
    session = Session()
    session.feed(
        RunStarted(),
        script(),
        nested_start("p/1", "p", path="a.txt"),
        nested_update("p/1", "p", "SECRET-CHILD-OUTPUT"),
        step=1.0,
    )
    text = session.chat.text("tool:p")
    assert text.startswith("🔧 fanout")
    assert "↳ … read  `a.txt`" in text
    assert "SECRET-CHILD-OUTPUT" not in text


# --- a parent with many children stays one message -------------------------------------------


@dataclass(frozen=True)
class Platform:
    name: str
    limits: PlatformLimits
    formatter: Formatter
    length: Any  # how the platform counts a message's length

    def session(self, verbosity: Verbosity = "all") -> Session:
        session = Session(self.limits)
        counter = itertools.count(1)
        session.renderer = Renderer(
            limits=self.limits,
            formatter=self.formatter,
            tokens=lambda: f"tok{next(counter)}",
            settings=ConversationSettings(verbosity=verbosity),
        )
        session.chat = Chat(self.limits)
        return session


PLATFORMS = [
    Platform("telegram", PlatformLimits(max_text=4096), telegram_format, utf16_len),
    Platform("slack", PlatformLimits(max_text=12_000), slack_format, len),
    Platform("discord", PlatformLimits(max_text=2000), discord_format, len),
    Platform("console", PlatformLimits(max_text=8000), lambda md, n: [md[:n]], len),
]


@pytest.mark.parametrize("n", [3, 200])
@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p.name)
def test_a_parent_with_many_children_stays_one_message_within_the_limit(
    platform: Platform, n: int
) -> None:
    session = platform.session()
    output = "\n".join(f"result line {i} " + "y" * 60 for i in range(40))
    ops = in_run(
        session,
        script(),
        *children("p", n, fail_every=40),
        tool_end("p", output, name="fanout"),
        step=0.01,
    )
    assert session.chat.slots("tool:") == ["tool:p"]
    tool_ops = [op for op in ops if isinstance(op, Send | Edit) and op.slot.startswith("tool:")]
    assert {op.slot for op in tool_ops} == {"tool:p"}
    assert sum(isinstance(op, Send) for op in tool_ops) == 1
    for op in tool_ops:
        assert platform.length(op.text) <= platform.limits.max_text
        assert op.task is not None
        assert len(op.task.output) <= TASK_TEXT
    text = session.chat.text("tool:p")
    assert text.startswith("✅ fanout")
    newest = f"read  `src/file_{n}.py` · {3 * n} ms"
    assert newest in text.replace("\\", "")  # the newest is shown
    assert "result line 39" in text  # the parent's own output still shows
    card = tool_ops[-1].task
    assert card is not None
    if n == 200:
        assert "… 188 earlier (184 ✓, 4 ✗)" in text.replace("\\", "")
        assert card.output.startswith("200 nested (195 ✓, 5 ✗)")
    else:
        assert "earlier" not in text
        assert card.output.startswith("3 nested (3 ✓)")


def test_two_hundred_children_in_compact_are_one_line_with_their_tally() -> None:
    session = Session(settings=ConversationSettings(verbosity="compact"))
    in_run(session, script(), *children("p", 200, fail_every=40), tool_end("p", name="fanout"))
    assert session.chat.slots("tools:") == ["tools:1"]
    assert session.chat.text("tools:1").count("\n") == 0
    assert session.chat.text("tools:1").endswith("· 200 nested (195 ✓, 5 ✗)")


def test_the_edits_of_a_parent_are_paced_however_fast_its_children_come() -> None:
    session = Session()  # edit interval 1 s
    session.feed(RunStarted(), script(), *children("p", 200), step=0.01)  # 4 s of events
    session.tick(1.5)
    assert session.chat.ops["tool:p"] <= 4 / 1.0 + 3
    assert "↳ ✓ read  `src/file_200.py`" in session.chat.text("tool:p")  # the tick caught up


@pytest.mark.parametrize(
    ("count", "budget", "first"),
    [
        (0, 500, None),
        (3, 500, "↳ ✓ t  `a`"),
        (13, 5000, "… 1 earlier (1 ✓)"),
        (200, 300, "… 188 earlier (188 ✓)"),
        (200, 100, "… 193 earlier (193 ✓)"),
        (5, 10, "… 5 earlier (5 ✓)"),
    ],
)
def test_sub_lines_keep_the_newest_within_their_budget(
    count: int, budget: int, first: str | None
) -> None:
    kids = Children({f"c{i}": Child("t", "a", 0.0, "ok") for i in range(count)})
    lines = sub_lines(kids, budget)
    assert (lines[0] if lines else None) == first
    assert sum(len(line) + 1 for line in lines) <= budget or len(lines) == 1


# --- unknown parents, late children, cuts -----------------------------------------------------


def test_a_child_of_an_unknown_parent_shows_under_a_placeholder_its_parent_then_names() -> None:
    session = Session()
    in_run(
        session,
        nested_start("q/1", "q", path="a.txt"),
        nested_end("q/1", "q"),
        nested_start("q/1/1", "q/1", path="b.txt"),  # its parent q/1 is known: under q
        nested_start("r/4/2", "r/4", path="c.txt"),  # neither r/4 nor r is known
        tool_end("q", "done", name="codemode"),
        tool_end("r", "done", name="codemode"),
    )
    assert session.chat.slots("tool:") == ["tool:q", "tool:r"]
    q = session.chat.text("tool:q")
    assert q.startswith("✅ codemode")
    assert "↳ ✓ read  `a.txt`" in q
    assert "↳ ⚠ read  `b.txt`" in q or "↳ … read  `b.txt`" in q
    assert "↳ " in session.chat.text("tool:r")


def test_a_child_that_reports_after_its_parent_ended_updates_the_parents_message() -> None:
    session = Session()
    session.feed(
        RunStarted(),
        script(),
        nested_start("p/1", "p", path="a.txt"),
        tool_end("p", "gave up waiting", name="fanout"),
        nested_end("p/1", "p", error=True, ms=40),
        step=1.5,
    )
    text = session.chat.text("tool:p")
    assert text.startswith("✅ fanout")
    assert "↳ ✗ read  `a.txt` · 40 ms" in text
    assert session.chat.slots("tool:") == ["tool:p"]


def test_children_still_running_when_the_run_ends_are_marked_cut() -> None:
    session = Session()
    session.feed(RunStarted(), script(), nested_start("p/1", "p", path="a.txt"), step=1.5)
    session.feed(RunEnded(), step=1.5)
    text = session.chat.text("tool:p")
    assert text.startswith("⚠️ fanout")
    assert "↳ ⚠ read  `a.txt`" in text

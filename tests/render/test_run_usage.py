"""What pi 1.x adds to a run's view: how it ended (`agent_settled.aborted`), how long
a tool took (`durationMs`), and the tokens, cost and context the agent reports.

Pure: the renderer fed decoded events, as in test_renderer.py; usage.py's text by table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from bridge.render.usage import ContextUse, context_of, short
from bridge.rpc.signals import RunEnded, RunStarted
from tests.render.test_renderer import Session, assistant, end, event, start, tool_start

if TYPE_CHECKING:
    from bridge.rpc.agent_event import AgentEvent

SHORT = [(0, "0"), (950, "950"), (1000, "1k"), (1234, "1.2k"), (9999, "10k"), (45_000, "45k")]
SHORT += [(200_000, "200k"), (999_499, "999k"), (999_500, "1M"), (1_250_000, "1.2M")]


@pytest.mark.parametrize(("n", "text"), SHORT)
def test_a_token_count_reads_at_a_glance(n: int, text: str) -> None:
    assert short(n) == text


W = "contextWindow"
CONTEXTS: list[tuple[object, str | None, str | None]] = [
    ({"tokens": 45_000, W: 200_000, "percent": 22.5}, "context 45k / 200k (22 %)", "context 22 %"),
    ({"tokens": 621, W: 128000, "percent": 0.485}, "context 621 / 128k (0 %)", "context 0 %"),
    ({"tokens": 64_000, W: 128_000}, "context 64k / 128k (50 %)", "context 50 %"),
    ({"tokens": None, W: 200_000, "percent": None}, "context ? / 200k", None),
    ({"tokens": 5, W: 0, "percent": 1}, None, None),
    ({"tokens": True, W: 100}, "context ? / 100", None),
    ("not an object", None, None),
    (None, None, None),
]  # fmt: skip


@pytest.mark.parametrize(("use", "line", "brief"), CONTEXTS)
def test_the_context_in_use_as_get_session_stats_reports_it(
    use: object, line: str | None, brief: str | None
) -> None:
    found = context_of({"contextUsage": use} if use is not None else {})
    assert (found.line() if found else None) == line
    assert (found.brief() if found else None) == brief


def run_of(*events: AgentEvent, context: ContextUse | None = None) -> str:
    session = Session()
    session.feed(RunStarted(), event(type="agent_start"), *events)
    session.renderer.context_used(context)
    session.feed(RunEnded())
    return session.chat.text("status:1")


def settled(aborted: bool | None) -> AgentEvent:
    fields: dict[str, Any] = {"type": "agent_settled"}
    if aborted is not None:
        fields["aborted"] = aborted
    return event(**fields)


def agent_end() -> AgentEvent:
    return event(type="agent_end", messages=[])


# (last answer, agent_settled.aborted) → how the final line begins. Where 1.x says, it
# decides: an error that merely mentions an abort is a failure, and a run stopped just
# after its last answer is stopped; without the field the last answer's end decides.
ENDINGS = [
    (end("", stop="error", error="upstream request aborted"), False, "⚠️ failed · "),
    (end("", stop="error", error="upstream request aborted"), None, "⏹ stopped · "),
    (end("all done"), True, "⏹ stopped · "),
    (end("all done"), False, "✅ done · "),
    (end("all done"), None, "✅ done · "),
    (end("part", stop="aborted"), True, "⏹ stopped · "),
    (end("part", stop="aborted"), None, "⏹ stopped · "),
]


@pytest.mark.parametrize(("last", "aborted", "begins"), ENDINGS)
def test_a_run_is_stopped_only_when_it_was(
    last: AgentEvent, aborted: bool | None, begins: str
) -> None:
    assert run_of(start(), last, agent_end(), settled(aborted)).startswith(begins)


def test_the_final_line_shows_tokens_cost_and_context_where_the_agent_reports_them() -> None:
    paid = {**assistant("hi"), "usage": {"input": 900, "output": 400, "cost": {"total": 0.03}}}
    use = ContextUse(45_000, 200_000, 22.5)
    line = run_of(start(), event(type="message_end", message=paid), agent_end(), context=use)
    assert line.startswith("✅ done · ")
    assert line.endswith(" · 1.3k tokens · $0.03 · context 22 %")
    totalled = {**assistant("hi"), "usage": {"input": 1, "output": 1, "totalTokens": 2500}}
    line = run_of(start(), event(type="message_end", message=totalled), agent_end())
    assert line.endswith(" · 2.5k tokens")
    unknown = ContextUse(None, 200_000, None)  # right after a compaction
    line = run_of(
        start(), event(type="message_end", message=totalled), agent_end(), context=unknown
    )
    assert line.endswith(" · 2.5k tokens")
    free = {**assistant("hi"), "usage": {}}
    line = run_of(start(), event(type="message_end", message=free), agent_end())
    assert "tokens" not in line
    assert "context" not in line


def test_a_stopped_run_still_says_what_it_spent() -> None:
    line = run_of(start(), end("part", stop="aborted"), agent_end(), settled(True))
    assert line.startswith("⏹ stopped · ")
    assert line.endswith(" · 2 tokens")


def tool_end_after(call: str, duration_ms: float | None) -> AgentEvent:
    fields: dict[str, Any] = {
        "type": "tool_execution_end",
        "toolCallId": call,
        "toolName": "bash",
        "result": {"content": [{"type": "text", "text": "ok"}]},
        "isError": False,
    }
    if duration_ms is not None:
        fields["durationMs"] = duration_ms
    return event(**fields)


@pytest.mark.parametrize(
    ("duration_ms", "took"), [(1500.0, "· 1.5 s"), (315.0, "· 0.3 s"), (None, "· 0.1 s")]
)
def test_a_tool_s_time_is_the_agent_s_measure_where_it_sends_one(
    duration_ms: float | None, took: str
) -> None:
    session = Session()
    session.feed(RunStarted(), event(type="agent_start"), tool_start("c1", command="ls"))
    session.feed(tool_end_after("c1", duration_ms), step=0.1)  # the bridge saw 0.1 s
    assert took in session.chat.text("tool:c1").split("\n")[0]

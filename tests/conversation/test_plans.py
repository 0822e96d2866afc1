"""What plan mode refuses (bridge/conversation/plans.py `refusal`): while a plan is made
or waits for its buttons, every tool the gate asks about but pi's read-only ones; once
it is executing, or with no plan, nothing."""

from __future__ import annotations

import pytest

from bridge.approvals import ApprovalAsk
from bridge.conversation.plans import refusal
from bridge.store.records import ConversationRecord, PlanPhase, PlanRecord


def record(phase: PlanPhase | None) -> ConversationRecord:
    plan = None if phase is None else PlanRecord(phase=phase, task="t", by="1", slot="plan:1")
    return ConversationRecord(
        key="test:1", workspace="/w", session_dir="/s", plan=plan, created_at=0, last_active=0
    )


def ask(tool: str, **arguments: object) -> ApprovalAsk:
    return ApprovalAsk(tool=tool, tool_call_id="c1", cwd="/w", input=arguments, truncated=False)


CASES: list[tuple[str, PlanPhase | None, ApprovalAsk, bool]] = [
    ("a write while planning", "planning", ask("write", path="a"), True),
    ("an edit while the plan waits", "ready", ask("edit", path="a"), True),
    ("a write while revising", "revising", ask("write", path="a"), True),
    ("even ls in bash", "planning", ask("bash", command="ls"), True),
    ("an extension's tool", "planning", ask("send_file", path="a"), True),
    ("a read (gate mode all)", "planning", ask("read", path="a"), False),
    ("grep, find and ls", "planning", ask("grep", pattern="x"), False),
    ("a write once executing", "executing", ask("write", path="a"), False),
    ("a write with no plan", None, ask("write", path="a"), False),
]


@pytest.mark.parametrize(
    ("phase", "call", "refused"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_plan_mode_refuses_all_but_the_read_only_tools_until_execute(
    phase: PlanPhase | None, call: ApprovalAsk, refused: bool
) -> None:
    reason = refusal(record(phase), call)
    assert (reason is not None) is refused
    if reason is not None:
        assert f"`{call.tool}`" in reason
        assert "read, grep, find, ls" in reason


def test_no_record_refuses_nothing() -> None:
    assert refusal(None, ask("write", path="a")) is None

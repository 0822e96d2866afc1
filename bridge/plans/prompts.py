"""What the agent is told while it plans, when a plan is revised and when it is
carried out (pure). The plan's rules are kept by the bridge, not by these words:
while the agent plans, the approval gate refuses every tool but the read-only ones
(bridge/conversation/plans.py); the words only save the model from trying."""

from __future__ import annotations

READ_ONLY_TOOLS = ("read", "grep", "find", "ls")

PLANNING = (
    "Plan first: do not change anything yet. Only the read-only tools ({tools}) work "
    "until the plan is approved; every other tool call is refused.\n\n"
    "Task: {task}\n\n"
    "Look at what you need, then answer with the plan as a numbered list (1., 2., …), "
    "one short line per step, and nothing after the list."
)

REVISING = (
    "The plan is not approved yet; the person asks for changes: {revision}\n\n"
    "The plan so far:\n{plan}\n\n"
    "Still change nothing (only {tools} work). Answer with the whole revised plan as a "
    "numbered list (1., 2., …), one short line per step, and nothing after the list."
)

EXECUTING = (
    "The plan is approved: carry it out now; your tools work again.\n\n"
    "The plan:\n{plan}\n\n"
    "When you have finished a step, say so on a line of its own as `Step N done` "
    "(N is the step's number), so the chat can tick it off."
)

REFUSED = (
    "Refused: this conversation is planning, so only the read-only tools ({tools}) run "
    "until the plan is approved. `{tool}` changes things or cannot be shown not to. "
    "Do not try to work around this; finish the plan as a numbered list instead."
)


def _tools() -> str:
    return ", ".join(READ_ONLY_TOOLS)


def planning(task: str) -> str:
    return PLANNING.format(task=task, tools=_tools())


def revising(plan: str, revision: str) -> str:
    return REVISING.format(plan=plan, revision=revision, tools=_tools())


def executing(plan: str) -> str:
    return EXECUTING.format(plan=plan)


def refused(tool: str) -> str:
    return REFUSED.format(tool=tool, tools=_tools())

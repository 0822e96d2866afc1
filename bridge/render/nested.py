"""Nested tool calls: the calls a tool makes while it runs, shown inside that tool.

pi 1.x lets a tool run other tools (`ctx.executeTool()`: codemode scripts, MCP, an
extension's tool); each such call has the id `<caller>/<n>` and its `tool_execution_*`
events carry `parentToolCallId` (docs/rpc.md, "Nested tool calls"). The caller may
itself be nested, so every nested call belongs to one root: the model-issued call whose
message (or task card) shows it. `Children` keeps a root's nested calls in the order
they started; `sub_lines` and `tally` render them. Invariants: a root with any number
of children renders within the character budget it is given (the oldest lines give
way to "… N earlier (✓/✗ counts)"), and nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bridge.render.textbits import clip, duration, inline_code

ChildState = Literal["running", "ok", "error", "cut"]
MARKS: dict[ChildState, str] = {"running": "…", "ok": "✓", "error": "✗", "cut": "⚠"}
ARGS_CHARS = 48  # a sub-line's arguments: enough to tell two calls apart
MAX_LINES = 12  # sub-lines shown at most; older ones are only counted
TASK_LINES = 3  # sub-lines on a task card, whose output takes 256 characters


@dataclass
class Child:
    """One nested call as its root shows it."""

    name: str
    summary: str
    started: float | None
    state: ChildState = "running"
    took: float | None = None  # seconds, when it ended

    def line(self, *, code: bool = True) -> str:
        """ "↳ ✓ read  `a.txt` · 12 ms"; without `code` (a task card's plain text), the
        arguments go bare."""
        args = clip(self.summary, ARGS_CHARS)
        args = f"  {inline_code(args) if code else args}" if args else ""
        took = f" · {_took(self.took)}" if self.took is not None else ""
        return f"↳ {MARKS[self.state]} {self.name}{args}{took}"


@dataclass
class Children:
    """A root call's nested calls by id, in the order they started."""

    calls: dict[str, Child] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.calls)

    def cut(self) -> bool:
        """The root stopped: what still runs will never say it ended (False: none ran)."""
        running = [child for child in self.calls.values() if child.state == "running"]
        for child in running:
            child.state = "cut"
        return bool(running)


def _took(seconds: float) -> str:
    """Nested calls are often quick: "12 ms" under a second, then as `duration`."""
    return f"{round(max(0.0, seconds) * 1000)} ms" if seconds < 1 else duration(seconds)


def tally(calls: list[Child] | Children) -> str:
    """ "200 nested (195 ✓, 5 ✗)"; running and cut calls are counted when there are any."""
    items = list(calls.calls.values()) if isinstance(calls, Children) else calls
    return f"{len(items)} nested ({_counts(items)})" if items else ""


def _counts(items: list[Child]) -> str:
    parts = []
    for state in ("ok", "error", "running", "cut"):
        n = sum(1 for child in items if child.state == state)
        if n:
            parts.append(f"{n} running" if state == "running" else f"{n} {MARKS[state]}")
    return ", ".join(parts)


def sub_lines(children: Children, budget: int, max_lines: int = MAX_LINES) -> list[str]:
    """The newest children as lines, within `max_lines` lines and `budget` characters
    (newlines counted); the older ones summed up in a first line."""
    items = list(children.calls.values())
    shown = [child.line() for child in items[-max_lines:]]
    while True:
        hidden = items[: len(items) - len(shown)]
        head = [f"… {len(hidden)} earlier ({_counts(hidden)})"] if hidden else []
        lines = head + shown
        if not shown or sum(len(line) + 1 for line in lines) <= budget:
            return lines
        shown.pop(0)  # the newest calls matter most

"""A plan's steps, read off the agent's text, and the checklist they show as (pure).

`steps` takes the plan's list: its numbered items ("1. …", "2) …") when it has any,
else its bullets ("- …", "* …", "• …"); items indented deeper than the list's first
are sub-points of a step and stay out. `ticked` finds the agent's progress marks,
"Step N done" (or complete / completed / finished) on a line of its own or inside
one: the execute prompt asks for exactly that (prompts.py), and nothing else ticks a
step, so a checklist never claims more than the agent said. `checklist` is the
Markdown the plan's message shows.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection

MAX_STEPS = 30  # a plan longer than this shows its first 30 as steps
STEP_CHARS = 200  # of one step in the checklist

_NUMBERED = re.compile(r"^(?P<indent>[ \t]*)(?P<number>\d{1,3})[.)][ \t]+(?P<text>\S.*)$")
_BULLET = re.compile(r"^(?P<indent>[ \t]*)(?:[-*•+])[ \t]+(?:\[[ xX]\][ \t]+)?(?P<text>\S.*)$")
_DONE = re.compile(
    r"\bstep[ \t]+#?(?P<number>\d{1,3})[ \t]*(?:is[ \t]+)?"
    r"(?:done|complete|completed|finished)\b",
    re.IGNORECASE,
)
_EMPHASIS = re.compile(r"^(\*\*|__)(.+)\1(.*)$")


def steps(text: str) -> list[str]:
    """The plan's steps, in order; [] when it has no list."""
    lines = text.splitlines()
    for pattern in (_NUMBERED, _BULLET):
        found = _items(lines, pattern)
        if found:
            return found[:MAX_STEPS]
    return []


def _items(lines: list[str], pattern: re.Pattern[str]) -> list[str]:
    items: list[str] = []
    indent: int | None = None
    for line in lines:
        match = pattern.match(line)
        if match is None:
            continue
        depth = len(match["indent"].expandtabs(4))
        if indent is None:
            indent = depth
        if depth > indent:
            continue  # a sub-point of the step above
        items.append(_clean(match["text"]))
    return [item for item in items if item]


def _clean(text: str) -> str:
    text = text.strip()
    emphasis = _EMPHASIS.match(text)
    if emphasis is not None:
        text = (emphasis[2] + emphasis[3]).strip()
    if len(text) > STEP_CHARS:
        text = text[: STEP_CHARS - 1] + "…"
    return text


def ticked(text: str, count: int) -> set[int]:
    """The step numbers (1 to `count`) that `text` says are done."""
    numbers = {int(m["number"]) for m in _DONE.finditer(text)}
    return {n for n in numbers if 1 <= n <= count}


def checklist(items: list[str], done: Collection[int]) -> str:
    """One line per step: ☑ once done, ☐ before."""
    return "\n".join(
        f"{'☑' if n in done else '☐'} {n}. {item}" for n, item in enumerate(items, start=1)
    )

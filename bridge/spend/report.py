"""The /usage table (pure): cost and tokens of the person asking, this chat and this
conversation, for today, this week and this month, and the limits that apply.

Narrow enough for a phone: one monospace block, 31 characters wide, three columns of
figures; tokens as 12.3k, 120k and 4.5M.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.spend.limits import Limits
    from bridge.spend.usage import UsageTotals

COLUMN = 8  # characters of one figure and the space before it
LABEL = 7  # characters of a row's label


@dataclass(frozen=True, slots=True)
class Row:
    """One subject of the table: its totals for today, this week, this month."""

    title: str  # "you (alice)", "this chat", "this conversation"
    today: UsageTotals
    week: UsageTotals
    month: UsageTotals
    limits: Limits | None = None  # its budget, if it has one
    raised: float = 0.0  # raised by approvers for today


def money(cost: float) -> str:
    """Dollars as a short figure: cents from a cent up, else four decimals."""
    if cost == 0:
        return "$0"
    if cost >= 1000:
        return f"${cost:,.0f}"
    return f"${cost:.2f}" if cost >= 0.01 else f"${cost:.4f}"


def tokens(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 100_000:
        return f"{count / 1000:.1f}k"
    if count < 1_000_000:
        return f"{count // 1000}k"
    return f"{count / 1_000_000:.1f}M"


def usage_table(rows: Sequence[Row], zone: str) -> str:
    """The whole answer of /usage, as Markdown (the table in a code block)."""
    head = " " * LABEL + "".join(h.rjust(COLUMN) for h in ("today", "week", "month"))
    lines = [head]
    for row in rows:
        periods = (row.today, row.week, row.month)
        lines.append(row.title)
        lines.append(_line("cost", [money(t.cost) for t in periods]))
        lines.append(_line("in", [tokens(t.input) for t in periods]))
        lines.append(_line("out", [tokens(t.output) for t in periods]))
        cache = [tokens(t.cache_read + t.cache_write) for t in periods]
        if any(t.cache_read + t.cache_write for t in periods):
            lines.append(_line("cache", cache))
    text = f"📊 *Usage* (days by {zone})\n```\n" + "\n".join(lines) + "\n```"
    limits = [line for row in rows if (line := _limits_line(row))]
    return text + ("\n" + "\n".join(limits) if limits else "")


def _line(label: str, figures: Sequence[str]) -> str:
    return f"  {label}".ljust(LABEL) + "".join(f.rjust(COLUMN) for f in figures)


def _limits_line(row: Row) -> str:
    limits = row.limits
    if limits is None or not limits.any:
        return ""
    parts = []
    if limits.daily is not None:
        raised = f" (+{money(row.raised)} today)" if row.raised else ""
        parts.append(f"{money(row.today.cost)} of {money(limits.daily)} today{raised}")
    if limits.monthly is not None:
        parts.append(f"{money(row.month.cost)} of {money(limits.monthly)} this month")
    if limits.per_run is not None:
        parts.append(f"at most {money(limits.per_run)} a run")
    return f"Budget, {row.title}: " + "; ".join(parts)

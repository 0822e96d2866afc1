"""What a run and a session cost in tokens, and how full the context is, as short text.

The agent reports the context in use in `get_session_stats` (`contextUsage`:
`tokens`, `contextWindow`, `percent`; tokens and percent are null right after a
compaction, until the next answer) and each assistant message's `usage`. Pure:
/status (controls/session.py) and a run's final status line (status.py) show these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from bridge.rpc.content import Usage


@dataclass(frozen=True, slots=True)
class ContextUse:
    """The context in use: `tokens` of `window`; None where the agent does not know."""

    tokens: int | None
    window: int
    percent: float | None

    def line(self) -> str:
        """ "context 45k / 200k (22 %)", or "context ? / 200k" while it is unknown."""
        used = "?" if self.tokens is None else short(self.tokens)
        share = f" ({self.percent:.0f} %)" if self.percent is not None else ""
        return f"context {used} / {short(self.window)}{share}"

    def brief(self) -> str | None:
        """ "context 22 %" for a run's final line; None while unknown."""
        return None if self.percent is None else f"context {self.percent:.0f} %"


def context_of(stats: Mapping[str, object]) -> ContextUse | None:
    """The `contextUsage` of a `get_session_stats` answer's data, if it has a usable one."""
    use = stats.get("contextUsage")
    if not isinstance(use, dict):
        return None
    window = _number(use.get("contextWindow"))
    if window is None or window <= 0:
        return None
    tokens, percent = _number(use.get("tokens")), _number(use.get("percent"))
    if percent is None and tokens is not None:
        percent = 100 * tokens / window
    return ContextUse(None if tokens is None else int(tokens), int(window), percent)


def tokens_of(usage: Usage) -> int:
    """The tokens one answer took: what the agent totals, or the sum of the parts."""
    if usage.totalTokens is not None:
        return usage.totalTokens
    return usage.input + usage.output + usage.cacheRead + usage.cacheWrite


def short(n: int) -> str:
    """ "950", "1.2k", "45k", "1.2M": a count of tokens to read at a glance."""
    if n < 1000:
        return str(max(0, n))
    if n < 10_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    if n < 999_500:
        return f"{round(n / 1000)}k"
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)

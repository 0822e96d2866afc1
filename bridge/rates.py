"""Which rate budgets a platform call takes from, and the token bucket they are kept in (pure).

A platform's limits (`PlatformLimits`) say per method how often it may be called and
over what: Slack's tiers hold "per API method per app per workspace", and only
chat.postMessage also per channel (docs/performance.md cites the pages). `rates_for`
names the budgets of one call of one method (`bridge.platform.MEMBERS` names the
methods) as `Rate`s: a key that is the same wherever the budget is kept (in the
process, or in Redis for a scale-out's processes together), a rate and a burst.

- Workspace-wide budgets: edits (`edit_rate`), stream starts and stream stops (each
  its own, `stream_rate`), appends (`append_rate`), status lines (`status_rate`),
  and `method_rates`. A method without one is not limited here.
- Per chat (`chat_methods`): the chat's rate with a burst of `chat_burst`, keyed by
  the chat, not its thread: Slack paces a channel's posts over all its threads.
  Platforms without `chat_methods` pace every call per chat in the outbox's lanes
  instead, so no per-chat budget is named here.

`TokenBucket` is the arithmetic of one budget: up to `burst` calls at once, then
`rate` a second; a taker that finds it empty takes on credit and is told how long
to wait, so takers are served in the order they came.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.model import ChatRef, PlatformLimits


@dataclass(frozen=True, slots=True)
class Rate:
    """One budget a call takes a token from."""

    key: str  # "<method>" over the workspace, "<method>:<chat id>" per chat
    rate: float  # tokens per second
    burst: int


def rates_for(limits: PlatformLimits, method: str, chat: ChatRef | None = None) -> list[Rate]:
    """The budgets one call of `method` (in `chat`, if it has one) takes from."""
    out: list[Rate] = []
    workspace = _workspace(limits).get(method)
    if workspace is not None and workspace[0] > 0:
        out.append(Rate(method, workspace[0], max(1, workspace[1])))
    if chat is not None and method in limits.chat_methods:
        rate = limits.chat_rate_in(chat)
        if rate > 0:
            out.append(Rate(f"{method}:{chat.chat_id}", rate, max(1, limits.chat_burst)))
    return out


def _workspace(limits: PlatformLimits) -> dict[str, tuple[float, int]]:
    """method → (rate, burst) of its workspace-wide budget."""
    table = {
        "edit": (limits.edit_rate, limits.edit_burst),
        "start_stream": (limits.stream_rate, limits.stream_burst),
        "stop_stream": (limits.stream_rate, limits.stream_burst),
        "append_stream": (limits.append_rate, limits.append_burst),
        # A status line is a nicety set only with a call to spare: a burst of 5 s.
        "set_status": (limits.status_rate, round(limits.status_rate * 5)),
    }
    table.update({method: (rate, burst) for method, rate, burst in limits.method_rates})
    return table


@dataclass(slots=True)
class TokenBucket:
    """One budget's state: `tokens` (negative: owed) as of the time `at`."""

    tokens: float = math.inf  # full, whatever the burst
    at: float = -math.inf

    def take(self, now: float, rate: float, burst: int) -> float:
        """Take a token, on credit if none is left; seconds to wait before the call."""
        if rate <= 0:
            return 0.0
        self._refill(now, rate, burst)
        self.tokens -= 1
        return max(0.0, -self.tokens / rate)

    def spare(self, now: float, rate: float, burst: int) -> bool:
        """Take a token only if one is free now, nobody waiting on credit for it."""
        if rate <= 0:
            return True
        self._refill(now, rate, burst)
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def wait(self, now: float, rate: float, burst: int) -> float:
        """Seconds until a token is free, taking none."""
        if rate <= 0:
            return 0.0
        self._refill(now, rate, burst)
        return max(0.0, (1 - self.tokens) / rate)

    def _refill(self, now: float, rate: float, burst: int) -> None:
        gained = (now - self.at) * rate if self.at > -math.inf else math.inf
        self.tokens = min(float(max(1, burst)), self.tokens + gained)
        self.at = now

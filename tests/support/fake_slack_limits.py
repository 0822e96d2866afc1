"""Slack's documented rate limits, as the fake Slack enforces them (`enforce_limits=True`).

Slack applies its limits "per API method per app per workspace"
(docs.slack.dev/apis/web-api/rate-limits): each method has a budget of its own, and a
429 (with Retry-After, whole seconds) for one method says nothing of the others. Only
chat.postMessage is special: "one message per second per channel, while also
maintaining a workspace-wide limit" (no figure given; not modelled). Each budget here is
a token bucket refilled at the documented floor, with a burst the tier's words allow:

| method | tier (its reference page) | bucket |
|---|---|---|
| chat.postMessage | special: 1 a second per channel, short bursts | 3, 1/s, per channel |
| chat.update | Tier 3, 50+ a minute, "sporadic bursts welcome" | 20, 1/s |
| chat.delete, reactions.add, reactions.remove | Tier 3 | 20, 1/s |
| chat.postEphemeral, chat.appendStream | Tier 4, 100+ a minute, "generous burst" | 50, 100/60 |
| chat.startStream, chat.stopStream | Tier 2, 20+ a minute | 10, 20/60 |
| assistant.threads.setStatus | special, no figure: the fake's Tier 3 | 20, 1/s |

chat.update of one message also waits 1 s after its last accepted update. A refused
call takes nothing, so a client that waits out Retry-After is served. Other methods
are not limited.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Budget:
    burst: float
    rate: float  # refill per second
    per: Literal["workspace", "channel"] = "workspace"


TIER2 = Budget(10.0, 20 / 60)
TIER3 = Budget(20.0, 1.0)
TIER4 = Budget(50.0, 100 / 60)
BUDGETS: dict[str, Budget] = {
    "chat.postMessage": Budget(3.0, 1.0, "channel"),
    "chat.update": TIER3,
    "chat.delete": TIER3,
    "reactions.add": TIER3,
    "reactions.remove": TIER3,
    "chat.postEphemeral": TIER4,
    "chat.appendStream": TIER4,
    "chat.startStream": TIER2,
    "chat.stopStream": TIER2,
    "assistant.threads.setStatus": TIER3,
}
UPDATE_INTERVAL = 1.0  # s between accepted chat.update calls of one message


@dataclass
class SlackLimits:
    """The budgets' state: (method, channel or "") → (tokens, as of)."""

    buckets: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    updated_at: dict[str, float] = field(default_factory=dict)  # ts → last accepted update

    def wait(self, method: str, args: Json, now: float) -> float:
        """Seconds until a call of `method` with `args` is allowed (0: allowed, and
        counted)."""
        budget = BUDGETS.get(method)
        if budget is None:
            return 0.0
        ts = str(args.get("ts"))
        if method == "chat.update":
            wait = self.updated_at.get(ts, -math.inf) + UPDATE_INTERVAL - now
            if wait > 0:
                return wait
        where = str(args.get("channel") or args.get("channel_id") or "")
        key = (method, where if budget.per == "channel" else "")
        tokens, then = self.buckets.get(key, (budget.burst, now))
        tokens = min(budget.burst, tokens + (now - then) * budget.rate)
        if tokens < 1:
            self.buckets[key] = (tokens, now)
            return (1 - tokens) / budget.rate
        self.buckets[key] = (tokens - 1, now)
        if method == "chat.update":
            self.updated_at[ts] = now
        return 0.0

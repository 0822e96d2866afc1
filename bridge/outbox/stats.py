"""`OutboxStats`: the outbox's counters, read by metrics and tests."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bridge.stats import LATENCY_BUCKETS, Histogram


@dataclass(slots=True)
class OutboxStats:
    """Counters for metrics and tests.

    `calls` counts platform calls by adapter method (failed ones included);
    `retries` every call repeated or replaced after a failure; `coalesced` ops merged
    into or cancelled against a queued op; `deferred` times a routine edit let the
    chat's other ops go first for want of spare edit budget; `dropped` ops never
    carried out, of which `failures` were given up after an error. `visible` times
    each Send and Edit that is not routine from `Outbox.submit` to the return of the
    platform call that carried it out: how long a person waited for what they see.
    """

    calls: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    rate_limited: int = 0
    rate_limited_calls: Counter[str] = field(default_factory=Counter)  # 429s by method
    coalesced: int = 0
    deferred: int = 0
    dropped: int = 0
    failures: int = 0
    visible: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))

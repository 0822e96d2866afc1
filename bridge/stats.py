"""Counters a bridge's conversations keep for the metrics endpoint.

Plain numbers updated in place (one event loop, so no locks); `bridge.app.metrics`
reads them when scraped. Latencies go into fixed-bucket histograms in the
Prometheus style: cumulative counts per upper bound, plus sum and count.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

# Seconds. Inbound-to-agent spans a warm agent (milliseconds) to a cold start
# (seconds); a dialog answer is a person reading a phone (seconds to minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ANSWER_BUCKETS = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, not cumulative; +Inf last
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count of observations ≤ le) for each bound and "+Inf"."""
        out, running = [], 0
        for bound, n in zip((*(f"{b:g}" for b in self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


@dataclass
class Stats:
    runs_started: int = 0
    runs_ended: int = 0
    undecodable: int = 0  # platform updates skipped because they could not be read
    events: Counter[str] = field(default_factory=Counter)  # agent events by class name
    inbound_to_agent: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    dialog_answer: Histogram = field(default_factory=lambda: Histogram(ANSWER_BUCKETS))
    # What the agents reported their models cost, each answer counted once
    # (bridge/spend/ledger.py): dollars, and tokens by kind (input, output, cache_*).
    spend_cost: float = 0.0
    spend_tokens: Counter[str] = field(default_factory=Counter)
    # Plans first (/plan) by what became of them: started, executed, revised,
    # cancelled; and "refused", the tool calls plan mode refused.
    plans: Counter[str] = field(default_factory=Counter)

    def event(self, event: object) -> None:
        # The class name, not the wire "type": unknown types from an agent would make
        # the label set unbounded; they all count as UnknownEvent.
        self.events[type(event).__name__] += 1

"""What a frontend or worker counts for the metrics endpoint (`bridge.app.metrics`).

Plain numbers updated in place on one event loop, read when scraped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bridge.stats import LATENCY_BUCKETS, Histogram


@dataclass
class ScaleStats:
    role: str = "all"  # all | frontend | worker
    name: str = ""  # the worker's or frontend's name in Redis
    leases_held: int = 0  # conversations this worker owns now
    lease_takeovers: int = 0  # conversations claimed after another worker's lease lapsed
    leases_lost: int = 0  # conversations this worker found owned by another
    redis_errors: int = 0  # Redis calls that failed (each retried with back-off)
    budget_waits: int = 0  # platform calls held back by the shared rate budget
    polling: bool = False  # this frontend holds the Telegram polling lease
    # From a frontend adding an inbound to its stream to the owning worker reading it.
    stream_lag: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    # A worker's platform call through a frontend, request to answer.
    call_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))

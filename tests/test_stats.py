"""The counters behind the metrics endpoint: histogram buckets and the rendered text."""

from __future__ import annotations

import pytest

from bridge.rpc.signals import RunEnded, RunStarted
from bridge.stats import Histogram, Stats


@pytest.mark.parametrize(
    ("values", "cumulative"),
    [
        ([], [("0.1", 0), ("1", 0), ("+Inf", 0)]),
        ([0.1], [("0.1", 1), ("1", 1), ("+Inf", 1)]),  # a bound is inclusive (le)
        ([0.05, 0.5, 5.0], [("0.1", 1), ("1", 2), ("+Inf", 3)]),
        ([2.0, 3.0], [("0.1", 0), ("1", 0), ("+Inf", 2)]),
    ],
)
def test_histogram_buckets_are_cumulative_and_le(
    values: list[float], cumulative: list[tuple[str, int]]
) -> None:
    histogram = Histogram((0.1, 1.0))
    for value in values:
        histogram.observe(value)
    assert histogram.cumulative() == cumulative
    assert histogram.count == len(values)
    assert histogram.total == pytest.approx(sum(values))


def test_events_are_counted_by_class_so_the_label_set_stays_bounded() -> None:
    stats = Stats()
    for event in (RunStarted(), RunStarted(), RunEnded()):
        stats.event(event)
    assert stats.events == {"RunStarted": 2, "RunEnded": 1}

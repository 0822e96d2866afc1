"""The bridge's one back-off rule: capped exponential waits, optionally jittered."""

from __future__ import annotations

import pytest

from bridge.backoff import Backoff, Retries
from tests.support.purity import forbidden_loads, pure_cores

# (the back-off, retry numbers, the waits before them)
WAITS = [
    (Backoff(0.5, 30.0), [1, 2, 3, 4, 5, 6, 7, 8], [0.5, 1, 2, 4, 8, 16, 30, 30]),
    (Backoff(0.5, 8.0), [1, 5, 6, 100], [0.5, 8, 8, 8]),
    (Backoff(0.05, 1.0), [1, 2, 3, 4, 5, 6], [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]),
    (Backoff(1.0, 60.0), [2, 3, 6, 7, 8], [2, 4, 32, 60, 60]),
    (Backoff(1.0, 100.0, factor=3.0), [1, 2, 3, 4, 5], [1, 3, 9, 27, 81]),
    (Backoff(2.0, 2.0), [1, 2, 50], [2, 2, 2]),
    (Backoff(1.0, 5.0, factor=1.0), [1, 9], [1, 1]),
    # A loop that retries for ever counts past where `factor ** n` overflows a float.
    (Backoff(0.1, 5.0), [10_000, 10**9], [5.0, 5.0]),
    (Backoff(1.0, 1e300, factor=10.0), [400], [1e300]),
]


@pytest.mark.parametrize(("backoff", "retries", "waits"), WAITS)
def test_each_wait_doubles_the_one_before_up_to_the_cap(
    backoff: Backoff, retries: list[int], waits: list[float]
) -> None:
    assert [backoff.delay(n) for n in retries] == pytest.approx(waits)


# (jitter, what the injected random draws, the wait before retry 3 of 0.5 s doubling)
JITTERED = [
    (0.5, 0.0, 2.0),  # a draw of 0 keeps the whole wait
    (0.5, 0.5, 1.5),
    (0.5, 0.999, 1.001),  # never below (1 - jitter) of it
    (1.0, 0.25, 1.5),  # full jitter: anywhere from 0 to the wait
    (0.0, 0.9, 2.0),  # no jitter: the draw is not used
]


@pytest.mark.parametrize(("jitter", "drawn", "wait"), JITTERED)
def test_jitter_takes_a_drawn_fraction_off_the_wait(
    jitter: float, drawn: float, wait: float
) -> None:
    backoff = Backoff(0.5, 30.0, jitter=jitter, draw=lambda: drawn)
    assert backoff.delay(3) == pytest.approx(wait)


def test_a_capped_wait_is_jittered_too() -> None:
    backoff = Backoff(0.5, 4.0, jitter=0.5, draw=lambda: 0.5)
    assert backoff.delay(20) == pytest.approx(3.0)


# (arguments, what the error says)
REFUSED = [
    ({"first": 0.0, "cap": 1.0}, "0 < first <= cap"),
    ({"first": 2.0, "cap": 1.0}, "0 < first <= cap"),
    ({"first": 1.0, "cap": 2.0, "factor": 0.5}, "shrinks"),
    ({"first": 1.0, "cap": 2.0, "jitter": 1.5, "draw": lambda: 0.0}, "fraction"),
    ({"first": 1.0, "cap": 2.0, "jitter": 0.5}, "needs a `draw`"),
]


@pytest.mark.parametrize(("arguments", "said"), REFUSED)
def test_a_back_off_that_makes_no_sense_is_refused(arguments: dict[str, object], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        Backoff(**arguments)  # type: ignore[arg-type]


def test_retries_count_from_one() -> None:
    with pytest.raises(ValueError, match="count from 1"):
        Backoff(1.0, 2.0).delay(0)


def test_retries_grow_with_each_failure_and_start_over_after_a_success() -> None:
    retries = Retries(Backoff(0.1, 0.5))
    assert [retries.next() for _ in range(5)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    assert retries.failures == 5
    retries.reset()
    assert retries.next() == pytest.approx(0.1)


def test_importing_the_back_off_loads_nothing_that_does_io() -> None:
    assert pure_cores("bridge.backoff") == ["bridge.backoff"]
    assert forbidden_loads("bridge.backoff") == []

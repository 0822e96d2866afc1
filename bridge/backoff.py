"""How long to wait before trying again: the one back-off rule of the bridge (pure).

`Backoff(first, cap)` is capped exponential: the wait before retry `n` (counted from 1)
is `first` times `factor` (2) for each retry before it, and never more than `cap`.
With `jitter` (a fraction of the wait, 0 to 1) each wait is drawn between
`(1 - jitter)` times that and that, from `draw` (a function returning a number in
[0, 1), such as `random.random`): injected, so that tests choose what it draws, and
several processes that failed together do not all come back at the same moment.
`Retries` is the running count of one loop that tries until it succeeds. Nothing here
sleeps: the caller does, with its own clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float  # seconds before the first retry
    cap: float  # the longest wait
    factor: float = 2.0
    jitter: float = 0.0
    draw: Callable[[], float] | None = None

    def __post_init__(self) -> None:
        if not 0 < self.first <= self.cap:
            raise ValueError(f"back-off needs 0 < first <= cap, not {self.first}, {self.cap}")
        if self.factor < 1:
            raise ValueError(f"a back-off factor under 1 shrinks: {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter is a fraction of the wait, 0 to 1, not {self.jitter}")
        if self.jitter and self.draw is None:
            raise ValueError("jitter needs a `draw` to draw it with")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1 for the first)."""
        if retry < 1:
            raise ValueError(f"retries count from 1, not {retry}")
        wait = self._capped(retry - 1)
        if self.draw is None or not self.jitter:
            return wait
        return wait * (1 - self.jitter * self.draw())

    def _capped(self, steps: int) -> float:
        # Compared in logarithms: `factor ** steps` overflows a float long before a
        # loop that retries for ever stops counting.
        if self.factor == 1 or steps * math.log(self.factor) < math.log(self.cap / self.first):
            return min(self.cap, self.first * self.factor**steps)
        return self.cap


class Retries:
    """The failures of one loop that tries until it succeeds: `next()` counts one and
    says how long to wait before trying again, `reset()` (after a success) starts
    the waits over from `first`."""

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self.failures = 0

    def next(self) -> float:
        self.failures += 1
        return self.backoff.delay(self.failures)

    def reset(self) -> None:
        self.failures = 0

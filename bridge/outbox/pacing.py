"""Time arithmetic of the outbox: the global rate, the edit budget and the retry back-off."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BACKOFF_FIRST: Final = 0.5  # seconds before the first retry of a transient error
BACKOFF_CAP: Final = 30.0


class Spacing:
    """The global rate: a token bucket holding one token, run as a schedule of
    reservations, so concurrent workers are served first come, first served and
    at most `rate` calls start in any second."""

    def __init__(
        self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._free_at = -math.inf

    async def take(self, rate: float) -> None:
        now = self._clock()
        at = max(now, self._free_at)
        self._free_at = at + interval(rate)
        if at > now:
            await self._sleep(at - now)


class Budget:
    """A token bucket of `burst` tokens refilled at `rate` per second. A taker that
    finds it empty takes a token on credit and waits until it is repaid, so takers
    are served in the order they came, and at most `burst` + `rate` * t calls start
    in any t seconds."""

    def __init__(
        self,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        rate: float,
        burst: int,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._rate = rate
        self._burst = float(max(1, burst))
        self._tokens = self._burst
        self._at = clock()

    async def take(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self._rate)


def interval(rate: float) -> float:
    """Seconds between calls at `rate` per second; no pacing for a rate of 0."""
    return 1.0 / rate if rate > 0 else 0.0


def backoff(tries: int) -> float:
    """Wait before retry number `tries` (1-based): 0.5 s doubling, capped."""
    return min(BACKOFF_CAP, BACKOFF_FIRST * 2.0 ** (tries - 1))

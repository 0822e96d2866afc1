"""Time arithmetic of the outbox: rate budgets (all calls, edits) and the retry back-off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from bridge.backoff import Backoff
from bridge.rates import TokenBucket

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

# Before each retry of a transient error: 0.5 s, doubling, at most 30 s.
TRANSIENT_BACKOFF: Final = Backoff(first=0.5, cap=30.0)


class Budget:
    """A token bucket (`bridge.rates.TokenBucket`): up to `burst` calls at once, then
    `rate` a second. A taker that finds it empty takes a token on credit and waits
    until it is repaid, so takers are served in the order they came and at most
    `burst` + `rate` * t calls start in any t seconds. Rate and burst are given with
    each call, read from the platform's limits on use; a rate of 0 means no limit."""

    def __init__(
        self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._bucket = TokenBucket()

    async def take(self, rate: float, burst: int = 1) -> None:
        wait = self._bucket.take(self._clock(), rate, burst)
        if wait > 0:
            await self._sleep(wait)

    def spare(self, rate: float, burst: int = 1) -> bool:
        """Take a token only if one is free now, nobody waiting on credit for it."""
        return self._bucket.spare(self._clock(), rate, burst)


def interval(rate: float) -> float:
    """Seconds between calls at `rate` per second; no pacing for a rate of 0."""
    return 1.0 / rate if rate > 0 else 0.0

"""The outbox's per-method rate budgets and the holds a platform's 429 puts on them.

`Pacer` asks `bridge.rates.rates_for` which budgets a call of a method takes from and
takes a token from each before the call (`take`, waiting on credit), or only if one
is free now (`spare`, for what may fall back or wait: a stream start, a status line,
a routine edit). Where the budgets are kept is a `RateStore`: `LocalRates` in the
process (one bridge, `--role all`), or Redis for a scale-out's processes together
(`bridge.scale.budget.SharedRates`), so a workspace-wide limit is one budget however
many workers share the workspace.

A 429 names its wait (`RateLimited.retry_after`); where the platform limits by
method (`PlatformLimits.chat_methods`), the wait holds that method's budgets, not a
chat: Slack's other methods, and the same method in other channels where it is per
channel, go on. The method last paced in a task is `last_method()`, so the outbox
knows which method a failed op's call was.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

from bridge.rates import Rate, TokenBucket, rates_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.model import ChatRef, PlatformLimits

# The method a task paced last: the call a RateLimited that follows came from.
_LAST: ContextVar[str] = ContextVar("_LAST", default="")
# A token the task took for its next call of this method while the op was queued.
_PREPAID: ContextVar[str] = ContextVar("_PREPAID", default="")


def last_method() -> str:
    return _LAST.get()


class RateStore(Protocol):
    """Where budgets and holds are kept."""

    async def take(self, rates: Sequence[Rate]) -> None:
        """Take a token from each of `rates`, waiting until that is allowed."""
        ...

    async def spare(self, rates: Sequence[Rate]) -> bool:
        """Take a token from each of `rates` if all have one free now; else none."""
        ...

    async def hold(self, keys: Sequence[str], seconds: float) -> None:
        """Hold the budgets `keys` for `seconds` (a 429's Retry-After)."""
        ...

    async def held(self, keys: Sequence[str]) -> float:
        """Seconds the longest hold on `keys` still lasts (0: none)."""
        ...


class LocalRates:
    """Budgets and holds in this process."""

    def __init__(
        self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[str, TokenBucket] = {}
        self._holds: dict[str, float] = {}

    async def take(self, rates: Sequence[Rate]) -> None:
        now = self._clock()
        wait = max((self._bucket(r.key).take(now, r.rate, r.burst) for r in rates), default=0.0)
        if wait > 0:
            await self._sleep(wait)

    async def spare(self, rates: Sequence[Rate]) -> bool:
        now = self._clock()
        if any(self._bucket(r.key).wait(now, r.rate, r.burst) > 0 for r in rates):
            return False
        for r in rates:
            self._bucket(r.key).spare(now, r.rate, r.burst)
        return True

    async def hold(self, keys: Sequence[str], seconds: float) -> None:
        until = self._clock() + seconds
        for key in keys:
            self._holds[key] = max(self._holds.get(key, -math.inf), until)

    async def held(self, keys: Sequence[str]) -> float:
        now = self._clock()
        return max((self._holds.get(k, -math.inf) - now for k in keys), default=0.0)

    def _bucket(self, key: str) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket()
        return bucket


class Pacer:
    """Per-method pacing of one platform's calls."""

    def __init__(self, store: RateStore, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.store = store
        self._sleep = sleep

    async def take(self, limits: PlatformLimits, method: str, chat: ChatRef | None = None) -> None:
        """Wait out any hold on `method`, then for a token of each of its budgets
        (unless the task `prepay`s for this call)."""
        _LAST.set(method)
        if _PREPAID.get() == method:
            _PREPAID.set("")
            return
        keys = hold_keys(limits, method, chat)
        while (left := await self.store.held(keys)) > 0:
            await self._sleep(left)
        rates = rates_for(limits, method, chat)
        if rates:
            await self.store.take(rates)

    async def spare(self, limits: PlatformLimits, method: str, chat: ChatRef | None = None) -> bool:
        """A token of each of `method`'s budgets if all have one now and none is held."""
        _LAST.set(method)
        if await self.store.held(hold_keys(limits, method, chat)) > 0:
            return False
        rates = rates_for(limits, method, chat)
        return not rates or await self.store.spare(rates)

    async def prepay(
        self, limits: PlatformLimits, method: str, chat: ChatRef | None = None
    ) -> None:
        """Take the task's next call of `method`'s tokens now: an op waits for them
        while still queued, so newer text merges into it meanwhile and the call
        carries the newest text when it goes."""
        _PREPAID.set("")
        await self.take(limits, method, chat)
        _PREPAID.set(method)

    async def spare_for_next(
        self, limits: PlatformLimits, method: str, chat: ChatRef | None = None
    ) -> bool:
        """`spare`, keeping the token for the task's next call of `method`."""
        if not await self.spare(limits, method, chat):
            return False
        _PREPAID.set(method)
        return True

    @staticmethod
    def unpaid() -> None:
        """Forget a prepaid token the task did not use (its op changed meanwhile)."""
        _PREPAID.set("")

    @staticmethod
    def note(method: str) -> None:
        """The task's next call is of `method`, paced elsewhere (an edit, while queued)."""
        _LAST.set(method)

    async def hold(
        self, limits: PlatformLimits, method: str, chat: ChatRef | None, seconds: float
    ) -> None:
        await self.store.hold(hold_keys(limits, method, chat), seconds)


def hold_keys(limits: PlatformLimits, method: str, chat: ChatRef | None) -> list[str]:
    """What a 429 of `method` holds: its budgets (per chat where it is paced per chat,
    else over the workspace); a method without budgets, by its name."""
    keys = [rate.key for rate in rates_for(limits, method, chat)]
    return keys or [method]

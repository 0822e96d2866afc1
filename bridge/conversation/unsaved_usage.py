"""Usage the store could not take (Redis restarting, a locked sqlite file): kept in the
conversation's memory and written once the store answers again, in order, so what a run
spent while the store was down still counts against its budgets.

Writing an entry is idempotent (the store keys it by its message), so one whose write
failed after the store took it is not counted twice. At most `KEPT` wait; past that the
oldest goes, said in the log. What still waits when the conversation closes is lost, and
said so in the log with its cost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from bridge.spend.usage import UsageEntry

log = logging.getLogger(__name__)

KEPT = 1000
RETRY_EVERY = 1.0  # s between tries while the store fails


class UnsavedUsage:
    def __init__(
        self,
        key: str,
        write: Callable[[UsageEntry], Awaitable[bool]],
        measure: Callable[[UsageEntry], None],
        soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], object],
    ) -> None:
        self._key = key
        self._write = write  # the store's add_usage: True when the entry was new
        self._measure = measure  # the metrics of an entry newly kept
        self._soon = soon  # runs the retries in the conversation's task group
        self._waiting: list[UsageEntry] = []

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def add(self, entry: UsageEntry) -> None:
        """Into the store now, or, if it fails, as soon as it answers again (after those
        already waiting)."""
        if not self._waiting and await self._written(entry):
            return
        self._waiting.append(entry)
        if len(self._waiting) > KEPT:
            gone = self._waiting.pop(0)
            log.error("%s: usage not recorded, too much waits: %s", self._key, _said(gone))
        if len(self._waiting) == 1:
            log.warning(
                "%s: the store failed recording usage; kept in memory until it answers",
                self._key,
            )
            self._soon(self._retrying)

    async def flush(self) -> bool:
        """Write what waits, in order; whether all of it is in the store now."""
        while self._waiting:
            if not await self._written(self._waiting[0]):
                return False
            self._waiting.pop(0)
        return True

    async def _retrying(self) -> None:
        try:
            while True:
                if await self.flush():
                    break
                await anyio.sleep(RETRY_EVERY)
            log.info("%s: usage kept while the store failed is recorded now", self._key)
        finally:
            if self._waiting:  # the conversation closed first
                cost = sum(e.cost for e in self._waiting)
                log.error(
                    "%s: %d usage record(s) never reached the store (cost %.6f)",
                    self._key,
                    len(self._waiting),
                    cost,
                )

    async def _written(self, entry: UsageEntry) -> bool:
        """Whether the store took `entry` (new ones are measured)."""
        try:
            new = await self._write(entry)
        # Any backend's failure (Redis, sqlite): the entry is kept for another try.
        except Exception as exc:  # noqa: BLE001
            log.debug("%s: recording usage failed: %s", self._key, exc)
            return False
        if new:
            self._measure(entry)
        return True


def _said(entry: UsageEntry) -> str:
    return f"message {entry.message}, cost {entry.cost:.6f}"

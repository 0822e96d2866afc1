"""The clock of scheduled work: every `tick` seconds, the due occurrences are fired.

Runs where conversations are owned (`--role all`, and every worker), one per
platform's bridge, over the schedules whose keys that bridge serves. Each tick reads
the schedules from the store and asks `occurrences.due` what to do; an occurrence is
fired only by the one caller that claims it in the store (`Store.seen` on a key that
names the schedule and the occurrence's time: one sqlite statement, or Redis's
`SET NX`), so two workers ticking at once fire it once. The claim comes first: a
run whose handing in then fails is counted failed, not run twice.

A run is handed in as an `Inbound` from the schedule's maker (`inject`): with
`--role all` through the bridge's own admission, in a worker onto the conversation's
stream, so whichever worker owns the conversation runs it, as it would a message.
The maker must still be on the allowlist when it fires. The clock (`wall`) and the
sleep are injected: tests turn the clock and call `tick` themselves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from bridge.admission import screen
from bridge.model import Inbound
from bridge.render.textbits import clip
from bridge.schedules.occurrences import due, shown
from bridge.schedules.rules import rule_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskStatus

    from bridge.options import BridgeOptions
    from bridge.schedules.occurrences import Due
    from bridge.store.base import Store
    from bridge.store.schedule_record import ScheduleRecord

log = logging.getLogger(__name__)

DRAFT_TTL = 24 * 3600.0  # an unconfirmed schedule is forgotten after a day
CLAIM_FLOOR = 2 * 24 * 3600.0  # a claim outlives any tick that could still see its occurrence
SHOWN_PROMPT = 120  # characters of the prompt in the chat's "⏰ scheduled" line


@dataclass
class ScheduleStats:
    """Counters for the metrics endpoint (pi_bridge_scheduled_runs_total)."""

    fired: int = 0
    missed: int = 0
    failed: int = 0


class Ticker:
    def __init__(
        self,
        store: Store,
        options: BridgeOptions,
        wall: Callable[[], float],
        inject: Callable[[Inbound], Awaitable[None]],
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._store = store
        self._options = options
        self._wall = wall
        self._inject = inject
        self._sleep = sleep
        self.stats = ScheduleStats()
        self._stopped = False

    def stop(self) -> None:
        """Fire nothing more: the bridge drains (a run claimed now would be lost)."""
        self._stopped = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:  # the first tick at start: what came due while the bridge was down
            await self.tick()
            await self._sleep(self._options.schedules.tick)

    async def tick(self) -> None:
        """Fire what is due now; one schedule's failure is its own."""
        if self._stopped:
            return
        now = self._wall()
        try:
            records = await self._store.schedules()
        except Exception:
            log.exception("could not read the schedules")
            return
        for record in records:
            if self._stopped or not record.key.startswith(self._options.key_prefix):
                continue
            try:
                await self._one(record, now)
            except Exception:
                self.stats.failed += 1
                log.exception("schedule %s failed", record.id)

    async def _one(self, record: ScheduleRecord, now: float) -> None:
        if record.state == "draft":
            if now - record.created_at > DRAFT_TTL:
                await self._store.delete_schedule(record.id)
            return
        if record.state != "active":
            return
        catch_up = self._options.schedules.catch_up
        found = due(
            rule_of(record), record.done_until, now, record.zone, record.created_at, catch_up
        )
        if found.until is None:
            return
        if found.missed and await self._claim(record, "missed", found.last_missed):
            await self._report_missed(record, found)
        if found.run is not None and await self._claim(record, "run", found.run):
            await self._fire(record, found.run)
        await self._advance(record.id, found.until)

    async def _claim(self, record: ScheduleRecord, what: str, moment: float | None) -> bool:
        ttl = max(CLAIM_FLOOR, 2 * self._options.schedules.catch_up)
        return not await self._store.seen(f"schedule:{record.id}:{what}:{moment}", ttl)

    async def _fire(self, record: ScheduleRecord, moment: float) -> None:
        prompt = clip(" ".join(record.prompt.split()), SHOWN_PROMPT)
        line = f"⏰ scheduled: {record.words} — {prompt}"
        inbound = self._inbound(record, f"run:{moment}", record.prompt, line)
        if screen(inbound, self._options.allowed_users) is not None:
            self.stats.failed += 1
            log.warning("schedule %s not run: its maker is no longer allowed", record.id)
            return
        await self._inject(inbound)
        self.stats.fired += 1
        log.info("schedule %s fired in %s", record.id, record.key)

    async def _report_missed(self, record: ScheduleRecord, found: Due) -> None:
        assert found.last_missed is not None
        runs = "a run" if found.missed == 1 else f"{found.missed} runs"
        late = _duration(self._options.schedules.catch_up)
        last = shown(found.last_missed, record.zone)
        line = (
            f"⏰ missed: {record.words} — {runs} (the last due {last}, {record.zone}) came"
            f" while the bridge was down, more than {late} ago."
        )
        self.stats.missed += found.missed
        inbound = self._inbound(record, f"missed:{found.last_missed}", "", line)
        if screen(inbound, self._options.allowed_users) is None:
            await self._inject(inbound)

    def _inbound(self, record: ScheduleRecord, what: str, text: str, line: str) -> Inbound:
        return Inbound(
            record.key,
            record.chat,
            record.maker,
            f"schedule:{record.id}:{what}",
            text=text,
            scheduled=line,
        )

    async def _advance(self, schedule_id: str, until: float) -> None:
        """Mark the occurrences up to `until` handled, on the record as it is now (a
        pause or a delete made meanwhile stays); a one-shot is done."""
        fresh = await self._store.get_schedule(schedule_id)
        if fresh is None:
            return
        if fresh.one_shot:
            await self._store.delete_schedule(schedule_id)
        elif until > fresh.done_until:
            await self._store.put_schedule(fresh.model_copy(update={"done_until": until}))


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 60)} min"

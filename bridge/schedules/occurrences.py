"""When a rule runs, and what one tick of the clock must do with a schedule (pure).

Times are unix seconds; a rule's wall-clock times are read in its zone (zoneinfo),
so "weekdays 9:00" stays 9:00 across a daylight-saving change. The daylight-saving
days follow cronsim, which does what Debian's cron does: a time the clock skips (a
02:30 run on the spring-forward night in Europe/Berlin) runs once, at the first
minute after the jump (03:00); a time the clock passes twice (01:30 on the fall-back
night) runs once, the first time. Spans ("every 2h") are real time and ignore the
clock's jumps.

`due` is the ticker's whole decision: the occurrences since the schedule was last
handled (`done_until`) up to `now`; the latest runs if it is at most `catch_up` late
(a tick is seconds late; a bridge that was down may be hours late), every other one
is missed, and reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from cronsim import CronSim

from bridge.schedules.when import Cron, Once, Span

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bridge.schedules.when import Rule

# A bridge down for longer than this counts the missed runs of the last week only:
# a per-minute rule would otherwise take seconds to count a year of them.
LOOKBACK = 7 * 24 * 3600.0


def runs_after(rule: Rule, start: float, zone: str, anchor: float) -> Iterator[float]:
    """The rule's times strictly after `start`, in order. `anchor`: when a span
    counts from (the schedule's making)."""
    match rule:
        case Cron(expr):
            for moment in CronSim(expr, datetime.fromtimestamp(start, ZoneInfo(zone))):
                yield moment.timestamp()
        case Span(seconds):
            done = max(0, int((start - anchor) // seconds) + 1)
            while True:
                yield anchor + done * seconds
                done += 1
        case Once(at):
            if at > start:
                yield at


def next_runs(rule: Rule, after: float, zone: str, anchor: float, count: int = 3) -> list[float]:
    """The next `count` times (fewer for a one-shot)."""
    found: list[float] = []
    for moment in runs_after(rule, after, zone, anchor):
        found.append(moment)
        if len(found) == count:
            break
    return found


@dataclass(frozen=True, slots=True)
class Due:
    """What a tick does with a schedule: run `run` (None: nothing runs), report
    `missed` occurrences (the latest of them `last_missed`), and remember that all up
    to `until` are handled."""

    run: float | None = None
    missed: int = 0
    last_missed: float | None = None
    until: float | None = None  # None: nothing was due


def due(
    rule: Rule, done_until: float, now: float, zone: str, anchor: float, catch_up: float
) -> Due:
    """The occurrences in (`done_until`, `now`], split into the one to run and those
    missed."""
    start = max(done_until, now - LOOKBACK)
    count, latest, before = 0, None, None
    for moment in runs_after(rule, start, zone, anchor):
        if moment > now:
            break
        count, before, latest = count + 1, latest, moment
    if latest is None:
        return Due()
    if now - latest <= catch_up:
        return Due(latest, count - 1, before, latest)
    return Due(None, count, latest, latest)


def local(moment: float, zone: str) -> datetime:
    """`moment` on the zone's clock."""
    return datetime.fromtimestamp(moment, ZoneInfo(zone))


def shown(moment: float, zone: str) -> str:
    """`moment` as a person reads it in the chat: "Mon 30 Nov 09:00"."""
    return f"{local(moment, zone):%a %d %b %H:%M}"


def known_zone(name: str) -> bool:
    """Whether zoneinfo knows the zone `name` ("Europe/Berlin", "UTC")."""
    try:
        ZoneInfo(name)
    except (ValueError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        return False
    return True

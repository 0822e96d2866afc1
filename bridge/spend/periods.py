"""Today, this week and this month, as unix times in a time zone (pure).

The bridge counts spend by the budgets' time zone (`[budgets] time_zone`, UTC unless
set): a day starts at local midnight, a week on Monday, a month on its first. The
zone comes in as a `tzinfo` (reading the zone database is the caller's I/O); the
time as an argument, never from a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo


@dataclass(frozen=True, slots=True)
class Periods:
    """When today, this week and this month began (unix seconds), and their names
    (what warnings and raised limits are keyed by)."""

    day: float
    week: float
    month: float
    day_name: str  # "2026-11-27"
    month_name: str  # "2026-11"


def periods(now: float, zone: tzinfo) -> Periods:
    today = datetime.fromtimestamp(now, zone).date()
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    return Periods(
        day=_midnight(today, zone),
        week=_midnight(monday, zone),
        month=_midnight(first, zone),
        day_name=today.isoformat(),
        month_name=f"{today.year:04d}-{today.month:02d}",
    )


def _midnight(day: date, zone: tzinfo) -> float:
    # An aware datetime's offset is worked out for its own wall time, so a day that
    # begins or ends a daylight-saving change still starts at its own midnight.
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()

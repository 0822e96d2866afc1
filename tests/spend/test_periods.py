"""Today, this week and this month in a time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bridge.spend.periods import periods


def at(text: str, zone: str = "UTC") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


@pytest.mark.parametrize(
    ("now", "zone", "day", "week", "month", "names"),
    [
        # A Friday afternoon in UTC.
        ("2026-11-27T15:30", "UTC", "2026-11-27T00:00", "2026-11-23T00:00", "2026-11-01T00:00",
         ("2026-11-27", "2026-11")),
        # 23:30 UTC is already the next day in Berlin, and a new month.
        ("2026-11-30T23:30", "Europe/Berlin", "2026-12-01T00:00", "2026-11-30T00:00",
         "2026-12-01T00:00", ("2026-12-01", "2026-12")),
        # The day daylight saving ends still starts at its own midnight.
        ("2026-10-25T12:00", "Europe/Berlin", "2026-10-25T00:00", "2026-10-19T00:00",
         "2026-10-01T00:00", ("2026-10-25", "2026-10")),
    ],
)  # fmt: skip
def test_periods_start_at_local_midnight_monday_and_the_first(
    now: str, zone: str, day: str, week: str, month: str, names: tuple[str, str]
) -> None:
    tz = ZoneInfo(zone)
    found = periods(at(now) if zone == "UTC" else _utc(now), tz)
    assert (found.day, found.week, found.month) == (at(day, zone), at(week, zone), at(month, zone))
    assert (found.day_name, found.month_name) == names


def _utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()

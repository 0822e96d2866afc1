"""The plain words of /every and /at mapped onto rules: a table per command, and the
daylight-saving days of a zone that has them (Europe/Berlin, 2026: clocks go forward
on 29 March at 02:00, back on 25 October at 03:00)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bridge.schedules.occurrences import due, next_runs, shown
from bridge.schedules.when import Cron, Once, Parsed, Span, WhenError, parse_at, parse_every

BERLIN = "Europe/Berlin"


def berlin(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=ZoneInfo(BERLIN))  # type: ignore[arg-type,misc]


@pytest.mark.parametrize(
    ("text", "rule", "words", "prompt"),
    [
        ("9:00 check CI", Cron("0 9 * * *"), "daily 09:00", "check CI"),
        ("daily 18:30 sum up", Cron("30 18 * * *"), "daily 18:30", "sum up"),
        ("weekdays 9:00 check CI", Cron("0 9 * * mon-fri"), "weekdays 09:00", "check CI"),
        ("weekday 09:05 x", Cron("5 9 * * mon-fri"), "weekdays 09:05", "x"),
        ("Weekdays At 9:00 check", Cron("0 9 * * mon-fri"), "weekdays 09:00", "check"),
        ("at 9:00 at home", Cron("0 9 * * *"), "daily 09:00", "at home"),
        ("weekends 10am walk", Cron("0 10 * * sat,sun"), "weekends 10:00", "walk"),
        ("mon 18:30 plan", Cron("30 18 * * mon"), "mon 18:30", "plan"),
        ("Monday 6:30pm plan", Cron("30 18 * * mon"), "mon 18:30", "plan"),
        ("mon,thu 7:00 gym", Cron("0 7 * * mon,thu"), "mon,thu 07:00", "gym"),
        ("2h rerun the flaky test", Span(7200), "every 2h", "rerun the flaky test"),
        ("30m poll", Span(1800), "every 30m", "poll"),
        ("1h30m poll", Span(5400), "every 1h30m", "poll"),
        ("1d tidy", Span(86400), "every 1d", "tidy"),
        ("0 9 * * 1-5 check CI", Cron("0 9 * * 1-5"), "cron 0 9 * * 1-5", "check CI"),
        ("*/15 * * * * ping", Cron("*/15 * * * *"), "cron */15 * * * *", "ping"),
    ],
)
def test_every_maps_plain_words_onto_a_rule(
    text: str, rule: object, words: str, prompt: str
) -> None:
    assert parse_every(text) == Parsed(rule, words, prompt)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "can't read when"),
        ("sometimes check CI", "can't read when"),
        ("25:00 check", "can't read when"),
        ("weekdays check CI", "can't read when"),
        ("9:00", "what should the agent do"),
        ("30s poll", "can't read when"),  # shorter than a minute
        ("0 9 * * 8 bad weekday", "can't read when"),
    ],
)
def test_every_refuses_what_it_cannot_read_and_says_what_would_work(text: str, says: str) -> None:
    with pytest.raises(WhenError, match=says):
        parse_every(text)


NOW = berlin(2026, 11, 27, 10, 0)  # a Friday


@pytest.mark.parametrize(
    ("text", "at", "prompt"),
    [
        ("in 30m remind me", berlin(2026, 11, 27, 10, 30), "remind me"),
        ("in 2h rerun", berlin(2026, 11, 27, 12, 0), "rerun"),
        ("9:00 standup", berlin(2026, 11, 28, 9, 0), "standup"),  # passed today: tomorrow's
        ("17:00 wrap up", berlin(2026, 11, 27, 17, 0), "wrap up"),
        ("today 17:00 wrap up", berlin(2026, 11, 27, 17, 0), "wrap up"),
        ("tomorrow 8:00 deploy", berlin(2026, 11, 28, 8, 0), "deploy"),
        ("tomorrow at 8:00 deploy", berlin(2026, 11, 28, 8, 0), "deploy"),
        ("mon 18:30 plan", berlin(2026, 11, 30, 18, 30), "plan"),
        ("fri 9:00 next week", berlin(2026, 12, 4, 9, 0), "next week"),
        ("2026-12-24 18:00 gifts", berlin(2026, 12, 24, 18, 0), "gifts"),
    ],
)
def test_at_maps_plain_words_onto_one_time(text: str, at: datetime, prompt: str) -> None:
    parsed = parse_at(text, NOW)
    assert parsed.rule == Once(at.timestamp())
    assert parsed.prompt == prompt


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("today 9:00 too late", "already passed"),
        ("2026-01-01 9:00 last year", "already passed"),
        ("in 10s soon", "can't read when"),
        ("later do it", "can't read when"),
        ("tomorrow 8:00", "what should the agent do"),
    ],
)
def test_at_refuses_the_past_and_what_it_cannot_read(text: str, says: str) -> None:
    with pytest.raises(WhenError, match=says):
        parse_at(text, NOW)


# --- daylight saving: what happens, in Europe/Berlin ---------------------------------


def _daily(expr: str, after: datetime) -> list[str]:
    return [
        shown(t, BERLIN) + f" {datetime.fromtimestamp(t, ZoneInfo(BERLIN)):%z}"
        for t in next_runs(Cron(expr), after.timestamp(), BERLIN, 0, 3)
    ]


def test_a_daily_0230_run_on_the_spring_forward_night_runs_once_right_after_the_jump() -> None:
    # 02:30 does not exist on 29 March: cron's rule runs it at 03:00 CEST, once.
    assert _daily("30 2 * * *", berlin(2026, 3, 28, 12, 0)) == [
        "Sun 29 Mar 03:00 +0200",
        "Mon 30 Mar 02:30 +0200",
        "Tue 31 Mar 02:30 +0200",
    ]


def test_a_daily_0130_run_on_the_fall_back_night_runs_once_the_first_time() -> None:
    # 01:30 does exist once on 25 October (the clock repeats 02:00-03:00): it runs once.
    assert _daily("30 1 * * *", berlin(2026, 10, 24, 12, 0)) == [
        "Sun 25 Oct 01:30 +0200",
        "Mon 26 Oct 01:30 +0100",
        "Tue 27 Oct 01:30 +0100",
    ]


def test_a_daily_0230_run_in_the_repeated_hour_runs_once_not_twice() -> None:
    assert _daily("30 2 * * *", berlin(2026, 10, 24, 12, 0)) == [
        "Sun 25 Oct 02:30 +0200",
        "Mon 26 Oct 02:30 +0100",
        "Tue 27 Oct 02:30 +0100",
    ]


def test_weekdays_at_nine_stays_nine_on_the_clock_across_the_change() -> None:
    runs = next_runs(Cron("0 9 * * mon-fri"), berlin(2026, 10, 23, 10, 0).timestamp(), BERLIN, 0)
    assert [shown(t, BERLIN) for t in runs] == [
        "Mon 26 Oct 09:00",
        "Tue 27 Oct 09:00",
        "Wed 28 Oct 09:00",
    ]
    assert runs[1] - runs[0] == 24 * 3600  # after the change: a plain day apart


def test_a_one_shot_at_a_skipped_time_runs_right_after_the_jump_like_a_daily_one() -> None:
    parsed = parse_at("2026-03-29 2:30 spring", berlin(2026, 3, 28, 12, 0))
    assert parsed.rule == Once(berlin(2026, 3, 29, 3, 0).timestamp())


def test_a_span_is_real_time_through_the_fall_back_night() -> None:
    start = berlin(2026, 10, 25, 0, 0).timestamp()
    runs = next_runs(Span(3600), start, BERLIN, start)
    assert [t - start for t in runs] == [3600, 7200, 10800]
    assert [shown(t, BERLIN) for t in runs] == [
        "Sun 25 Oct 01:00",
        "Sun 25 Oct 02:00",
        "Sun 25 Oct 02:00",
    ]


# --- what one tick does ---------------------------------------------------------------

HOUR = 3600.0
DAY0 = berlin(2026, 11, 23, 0, 0).timestamp()  # a Monday, midnight
NINE = Cron("0 9 * * *")


@pytest.mark.parametrize(
    ("done_until", "now", "run", "missed"),
    [
        (DAY0, DAY0 + 8 * HOUR, None, 0),  # nothing due yet
        (DAY0, DAY0 + 9 * HOUR + 10, DAY0 + 9 * HOUR, 0),  # a tick 10 s late: runs
        (DAY0, DAY0 + 9.9 * HOUR, DAY0 + 9 * HOUR, 0),  # down 54 min: runs at start
        (DAY0, DAY0 + 10.5 * HOUR, None, 1),  # down past catch_up: missed
        (DAY0, DAY0 + 24 * HOUR + 9.5 * HOUR, DAY0 + 33 * HOUR, 1),  # two due: latest runs
        (DAY0 + 9 * HOUR, DAY0 + 9 * HOUR + 30, None, 0),  # already handled
    ],
)
def test_a_tick_runs_the_latest_occurrence_within_catch_up_and_reports_the_rest(
    done_until: float, now: float, run: float | None, missed: int
) -> None:
    found = due(NINE, done_until, now, BERLIN, DAY0, HOUR)
    assert (found.run, found.missed) == (run, missed)

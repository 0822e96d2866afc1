"""The plain words of `/every` and `/at`, mapped onto rules (pure: `now` comes in).

A small grammar, not a date parser: each form people type on a phone is mapped
onto a rule the libraries evaluate. Recurring times become cron expressions, run by
`cronsim` (docs/commands.md, "Scheduled work", says why that library); one-shot
times become the next run of such an expression after `now`, so both follow the
same daylight-saving rule; "in 30m" and "every 2h" are spans of real time. Times of
day are read by `datetime.strptime`, dates by `date.fromisoformat`.

| `/every …`            | rule                        |
|-----------------------|-----------------------------|
| `9:00`, `daily 9:00`  | cron `0 9 * * *`            |
| `weekdays 9:00`       | cron `0 9 * * mon-fri`      |
| `weekends 10:00`      | cron `0 10 * * sat,sun`     |
| `mon 18:30`, `mon,thu 18:30` | cron `30 18 * * mon` |
| `2h`, `30m`, `1h30m`, `1d` | every span, from when it was made |
| five cron fields      | that cron expression        |

| `/at …`               | when                                    |
|-----------------------|-----------------------------------------|
| `in 30m`, `in 2h`     | now + the span                          |
| `9:00`                | the next 9:00                           |
| `today 17:00`         | today's, if still to come               |
| `tomorrow 8:00`       | tomorrow's                              |
| `mon 18:30`           | the next Monday's                       |
| `2026-12-24 18:00`    | that day's                              |

An "at" before the time is allowed ("weekdays at 9:00"). Whatever follows the time is
the prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from cronsim import CronSim, CronSimError

MIN_SPAN = 60  # seconds: cron's own resolution; a shorter one would flood the chat
MAX_SPAN = 366 * 24 * 3600
CRON_FIELDS = 5
_SPAN = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?:in)?)?")
_TIME_FORMATS = ("%H:%M", "%H.%M", "%I%p", "%I:%M%p", "%Hh")
_DAYS = {
    "mon": "mon", "monday": "mon", "tue": "tue", "tues": "tue", "tuesday": "tue",
    "wed": "wed", "wednesday": "wed", "thu": "thu", "thur": "thu", "thurs": "thu",
    "thursday": "thu", "fri": "fri", "friday": "fri", "sat": "sat", "saturday": "sat",
    "sun": "sun", "sunday": "sun",
}  # fmt: skip
_GROUPS = {
    "daily": "*", "day": "*", "everyday": "*",
    "weekdays": "mon-fri", "weekday": "mon-fri",
    "weekends": "sat,sun", "weekend": "sat,sun",
}  # fmt: skip
_LABELS = {"*": "daily", "mon-fri": "weekdays", "sat,sun": "weekends"}
EVERY_HELP = (
    "Try `/every weekdays 9:00 check CI`, `/every mon 18:30 …`, `/every 2h …`, "
    "`/every 9:00 …` or five cron fields: `/every 0 9 * * 1-5 …`."
)
AT_HELP = (
    "Try `/at 9:00 …`, `/at tomorrow 8:00 …`, `/at mon 18:30 …`, `/at in 30m …` "
    "or `/at 2026-12-24 18:00 …`."
)


class WhenError(ValueError):
    """The words name no time this grammar knows; the message says what would."""


@dataclass(frozen=True, slots=True)
class Cron:
    expr: str


@dataclass(frozen=True, slots=True)
class Span:
    """Every `seconds` of real time, counted from when the schedule was made."""

    seconds: int


@dataclass(frozen=True, slots=True)
class Once:
    at: float  # unix seconds


Rule = Cron | Span | Once


@dataclass(frozen=True, slots=True)
class Parsed:
    rule: Rule
    words: str  # the time as the bridge shows it back: "weekdays 09:00"
    prompt: str


def parse_every(text: str) -> Parsed:
    """The rule of `/every <when> <prompt>`."""
    tokens = _without_at(text.split())
    found = _recurring(tokens)
    if found is None:
        raise WhenError(f"I can't read when that should run. {EVERY_HELP}")
    rule, words, used = found
    return Parsed(rule, words, _prompt(tokens[used:], EVERY_HELP))


def parse_at(text: str, now: datetime) -> Parsed:
    """The time of `/at <when> <prompt>`, the first one after `now` (aware, in the
    chat's zone)."""
    tokens = _without_at(text.split())
    found = _one_shot(tokens, now)
    if found is None:
        raise WhenError(f"I can't read when that should run. {AT_HELP}")
    at, used = found
    if at <= now:
        raise WhenError(f"{at:%a %d %b %H:%M} has already passed.")
    return Parsed(Once(at.timestamp()), f"{at:%a %d %b %H:%M}", _prompt(tokens[used:], AT_HELP))


def _without_at(tokens: list[str]) -> list[str]:
    """The tokens without the "at" people put before a time ("weekdays at 9:00",
    "at 9:00")."""
    for index in (0, 1):
        after = tokens[index + 1] if len(tokens) > index + 1 else ""
        if after and tokens[index].lower() == "at" and parse_time(after) is not None:
            return tokens[:index] + tokens[index + 1 :]
    return tokens


def _prompt(rest: list[str], help_text: str) -> str:
    prompt = " ".join(rest)
    if not prompt:
        raise WhenError(f"And what should the agent do then? {help_text}")
    return prompt


def _recurring(tokens: list[str]) -> tuple[Rule, str, int] | None:
    if not tokens:
        return None
    head = tokens[0].lower()
    span = parse_span(head)
    if span is not None:
        return Span(span), f"every {head}", 1
    days = _days(head)
    if days is not None and len(tokens) > 1 and (at := parse_time(tokens[1])) is not None:
        hour, minute = at
        label = f"{_LABELS.get(days, days)} {hour:02d}:{minute:02d}"
        return Cron(f"{minute} {hour} * * {days}"), label, 2
    if (at := parse_time(head)) is not None:
        return Cron(f"{at[1]} {at[0]} * * *"), f"daily {at[0]:02d}:{at[1]:02d}", 1
    if len(tokens) >= CRON_FIELDS and valid_cron(expr := " ".join(tokens[:CRON_FIELDS])):
        return Cron(expr), f"cron {expr}", CRON_FIELDS
    return None


def _one_shot(tokens: list[str], now: datetime) -> tuple[datetime, int] | None:
    if not tokens:
        return None
    head = tokens[0].lower()
    if head == "in" and len(tokens) > 1 and (span := parse_span(tokens[1].lower())):
        return now + timedelta(seconds=span), 2
    if (at := parse_time(head)) is not None:
        return _next(f"{at[1]} {at[0]} * * *", now), 1
    if len(tokens) < 2 or (at := parse_time(tokens[1])) is None:
        return None
    minute, hour = at[1], at[0]
    day = _day(head, now)
    if day is not None:
        found = _next(f"{minute} {hour} {day.day} {day.month} *", _midnight(day, now))
        if found.date() != day:  # that day's time is behind `now`: the search went on
            raise WhenError(f"{day:%a %d %b} {hour:02d}:{minute:02d} has already passed.")
        return found, 2
    if head in _DAYS:
        return _next(f"{minute} {hour} * * {_DAYS[head]}", now), 2
    return None


def _day(word: str, now: datetime) -> date | None:
    """The calendar day `word` names: today, tomorrow, or an ISO date."""
    if word == "today":
        return now.date()
    if word == "tomorrow":
        return now.date() + timedelta(days=1)
    try:
        return date.fromisoformat(word)
    except ValueError:
        return None


def _midnight(day: date, now: datetime) -> datetime:
    """Just before `day` begins, in `now`'s zone (searching from there finds that day's
    time, even a time the clock skips that day)."""
    start = datetime(day.year, day.month, day.day, tzinfo=now.tzinfo) - timedelta(seconds=1)
    return max(start, now)


def _next(expr: str, after: datetime) -> datetime:
    return next(CronSim(expr, after))


def _days(word: str) -> str | None:
    """The cron day-of-week field of `weekdays`, `mon`, `mon,thu`, …; None if not days."""
    if word in _GROUPS:
        return _GROUPS[word]
    names = word.split(",")
    if all(name in _DAYS for name in names):
        return ",".join(_DAYS[name] for name in names)
    return None


def parse_time(word: str) -> tuple[int, int] | None:
    """(hour, minute) of `9:00`, `18:30`, `9am`, `6:30pm`, `9h`; None if it is none."""
    for fmt in _TIME_FORMATS:
        try:
            parsed = datetime.strptime(word.lower(), fmt)
        except ValueError:
            continue
        return parsed.hour, parsed.minute
    return None


def parse_span(word: str) -> int | None:
    """Seconds of `30m`, `2h`, `1h30m`, `1d`; None if it is none (or out of bounds)."""
    match = _SPAN.fullmatch(word)
    if match is None or not any(match.groups()):
        return None
    days, hours, minutes = (int(part or 0) for part in match.groups())
    seconds = ((days * 24 + hours) * 60 + minutes) * 60
    return seconds if MIN_SPAN <= seconds <= MAX_SPAN else None


def valid_cron(expr: str) -> bool:
    """Whether cronsim reads `expr` as a cron expression."""
    try:
        CronSim(expr, datetime(2000, 1, 1))
    except CronSimError:
        return False
    return True

"""Budgets and the decisions they make (pure): given what a person and a chat spent
and their limits, is a run let go, is someone warned, is a new run refused, is a
running one stopped.

A budget has three limits, each optional: `daily` and `monthly` cost, and `per_run`
(the cost of one run). People and chats each have one: the defaults of `[budgets]`,
overridden limit by limit for a named person or chat. An approver's raise for today
(`raised`) adds to the daily and the monthly limit until the day ends.

The decision at each moment of a run (`decide`):

- `start` (a message would start a run): a daily or monthly limit reached → refuse.
- `tool` (the agent starts a tool, its next boundary): any limit reached, the run's
  own included → stop.
- `usage` (an answer's cost was counted): nothing is stopped here; the run stops at
  its next tool, or ends by itself.

At every moment, a limit at `warn_at` (80 %) or more but not reached gives a warning,
once per limit and period: the decision names the warnings not given yet (`warned`
holds the keys of those given), and the caller claims each key in the store before
telling, so that even two workers tell it once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

Scope = Literal["person", "chat"]
Kind = Literal["daily", "monthly", "per_run"]
Moment = Literal["start", "usage", "tool"]
Action = Literal["ok", "warn", "refuse", "stop"]

WARN_AT = 0.8  # of a limit: the person is told once


@dataclass(frozen=True, slots=True)
class Limits:
    """One budget: dollars a day, a month, a run; None is no limit."""

    daily: float | None = None
    monthly: float | None = None
    per_run: float | None = None

    def over(self, defaults: Limits) -> Limits:
        """These limits, each unset one taken from `defaults`."""
        return Limits(
            self.daily if self.daily is not None else defaults.daily,
            self.monthly if self.monthly is not None else defaults.monthly,
            self.per_run if self.per_run is not None else defaults.per_run,
        )

    @property
    def any(self) -> bool:
        return (self.daily, self.monthly, self.per_run) != (None, None, None)


@dataclass(frozen=True)
class Budgets:
    """`[budgets]`: the defaults for every person and every chat, the named ones, the
    time zone periods are counted in, and how much an approver's press raises a
    limit for today (`raise_step`, a fraction of the limit reached)."""

    person: Limits = Limits()
    chat: Limits = Limits()
    people: Mapping[str, Limits] = field(default_factory=dict)
    chats: Mapping[str, Limits] = field(default_factory=dict)
    zone: tzinfo = UTC
    zone_name: str = "UTC"
    raise_step: float = 0.5
    warn_at: float = WARN_AT

    def of_person(self, person: str) -> Limits:
        return self.people.get(person, Limits()).over(self.person)

    def of_chat(self, chat: str) -> Limits:
        return self.chats.get(chat, Limits()).over(self.chat)

    @property
    def enabled(self) -> bool:
        return (
            self.person.any
            or self.chat.any
            or any(limits.any for limits in (*self.people.values(), *self.chats.values()))
        )


@dataclass(frozen=True, slots=True)
class Standing:
    """What one person or chat has spent, against its limits."""

    scope: Scope
    name: str  # the person's user id, the chat's name
    limits: Limits
    today: float = 0.0
    month: float = 0.0
    raised: float = 0.0  # by approvers, for today


@dataclass(frozen=True, slots=True)
class Reading:
    """One limit, and what was spent against it."""

    scope: Scope
    name: str
    kind: Kind
    spent: float
    limit: float

    def key(self, period: str) -> str:
        """Names the limit in one period (a day, a month, a run): a warning's key."""
        return f"{self.scope}:{self.name}:{self.kind}:{period}"

    @property
    def share(self) -> float:
        return self.spent / self.limit if self.limit > 0 else 1.0


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reading: Reading | None = None  # the limit that refuses or stops
    warnings: tuple[Reading, ...] = ()  # limits past `warn_at`, not warned of yet


def readings(standings: Sequence[Standing], run_cost: float) -> list[Reading]:
    """Every limit that is set, in order: each standing's daily, monthly, per run."""
    out: list[Reading] = []
    for s in standings:
        for kind, spent, limit in (
            ("daily", s.today, s.limits.daily),
            ("monthly", s.month, s.limits.monthly),
            ("per_run", run_cost, s.limits.per_run),
        ):
            if limit is not None:
                extra = s.raised if kind != "per_run" else 0.0
                out.append(Reading(s.scope, s.name, kind, spent, limit + extra))  # type: ignore[arg-type]
    return out


def decide(
    moment: Moment,
    standings: Sequence[Standing],
    *,
    run_cost: float = 0.0,
    periods: Mapping[Kind, str],
    warned: Collection[str] = (),
    warn_at: float = WARN_AT,
) -> Decision:
    """What the limits say at `moment`; `periods` names the day, month and run that
    warnings are keyed by."""
    all_readings = readings(standings, run_cost)
    # A run not started yet has spent nothing: its own limit cannot refuse it.
    counted = [r for r in all_readings if moment != "start" or r.kind != "per_run"]
    reached = [r for r in counted if r.spent >= r.limit]
    if reached and moment == "start":
        return Decision("refuse", reached[0])
    if reached and moment == "tool":
        return Decision("stop", reached[0])
    warnings = tuple(
        r
        for r in counted
        if r not in reached
        and r.spent >= warn_at * r.limit
        and r.key(periods[r.kind]) not in warned
    )
    return Decision("warn", warnings[0], warnings) if warnings else Decision("ok")


def raise_amount(limit: float, step: float) -> float:
    """What one press of [Raise today's limit] adds: `step` of the limit reached (as
    configured, without earlier raises), rounded to the cent, at least one."""
    return max(0.01, round(limit * step, 2))

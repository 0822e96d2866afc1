"""The budget decisions, as tables: spend and limits in, ok / warn / refuse / stop out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.spend.limits import Budgets, Limits, Standing, decide, raise_amount

if TYPE_CHECKING:
    from bridge.spend.limits import Kind

PERIODS: dict[Kind, str] = {"daily": "2026-11-27", "monthly": "2026-11", "per_run": "run1"}
DAY = Limits(daily=1.0)
MONTH = Limits(monthly=10.0)
RUN = Limits(per_run=0.5)


def person(limits: Limits, today: float = 0.0, month: float = 0.0, raised: float = 0.0) -> Standing:
    return Standing("person", "42", limits, today, month, raised)


def chat(limits: Limits, today: float = 0.0, month: float = 0.0) -> Standing:
    return Standing("chat", "tg:1", limits, today, month)


@pytest.mark.parametrize(
    ("moment", "standings", "run_cost", "action", "which"),
    [
        # Nothing set, or far from every limit: ok.
        ("start", [], 0.0, "ok", None),
        ("start", [person(DAY, today=0.5)], 0.0, "ok", None),
        ("tool", [person(DAY, today=0.79)], 0.0, "ok", None),
        # 80 % of a limit: a warning, at every moment.
        ("start", [person(DAY, today=0.8)], 0.0, "warn", "person:daily"),
        ("usage", [person(MONTH, month=9.0)], 0.0, "warn", "person:monthly"),
        ("tool", [chat(DAY, today=0.95)], 0.0, "warn", "chat:daily"),
        ("usage", [person(RUN)], 0.4, "warn", "person:per_run"),
        # A limit reached: a new run is refused, a running one stopped at a tool.
        ("start", [person(DAY, today=1.0)], 0.0, "refuse", "person:daily"),
        ("start", [person(MONTH, month=12.0)], 0.0, "refuse", "person:monthly"),
        ("start", [person(DAY), chat(DAY, today=1.5)], 0.0, "refuse", "chat:daily"),
        ("tool", [person(DAY, today=1.2)], 0.0, "stop", "person:daily"),
        ("tool", [chat(MONTH, month=10.0)], 0.0, "stop", "chat:monthly"),
        # The per-run cap stops a run; it never refuses one (a new run spent nothing).
        ("tool", [person(RUN)], 0.5, "stop", "person:per_run"),
        ("start", [person(Limits(per_run=0.0))], 0.0, "ok", None),
        # At the answer itself nothing is stopped: the next tool is the boundary.
        ("usage", [person(DAY, today=3.0)], 0.0, "ok", None),
        # A raise for today lifts the daily and the monthly limit.
        ("start", [person(DAY, today=1.2, raised=0.5)], 0.0, "ok", None),
        ("start", [person(MONTH, month=10.2, raised=0.5)], 0.0, "warn", "person:monthly"),
        ("start", [person(DAY, today=1.5, raised=0.5)], 0.0, "refuse", "person:daily"),
        ("tool", [person(RUN, raised=5.0)], 0.6, "stop", "person:per_run"),
        # A limit of nothing: every run is refused.
        ("start", [person(Limits(daily=0.0))], 0.0, "refuse", "person:daily"),
    ],
)
def test_the_decision_at_each_moment(
    moment: str, standings: list[Standing], run_cost: float, action: str, which: str | None
) -> None:
    decision = decide(moment, standings, run_cost=run_cost, periods=PERIODS)  # type: ignore[arg-type]
    assert decision.action == action
    reading = decision.reading
    assert (f"{reading.scope}:{reading.kind}" if reading else None) == which


def test_a_warning_given_once_is_not_given_again_in_its_period() -> None:
    standing = [person(DAY, today=0.9)]
    first = decide("usage", standing, periods=PERIODS)
    assert [r.key(PERIODS[r.kind]) for r in first.warnings] == ["person:42:daily:2026-11-27"]
    warned = {"person:42:daily:2026-11-27"}
    assert decide("usage", standing, periods=PERIODS, warned=warned).action == "ok"
    # The next day is another period: warned again.
    tomorrow: dict[Kind, str] = {**PERIODS, "daily": "2026-11-28"}
    assert decide("usage", standing, periods=tomorrow, warned=warned).action == "warn"


def test_every_limit_past_80_percent_is_warned_of_together() -> None:
    standings = [person(Limits(daily=1.0, monthly=1.0), today=0.85, month=0.9), chat(DAY, 0.99)]
    decision = decide("usage", standings, periods=PERIODS)
    assert [(r.scope, r.kind) for r in decision.warnings] == [
        ("person", "daily"),
        ("person", "monthly"),
        ("chat", "daily"),
    ]


@pytest.mark.parametrize(
    ("named", "defaults", "expected"),
    [
        (None, Limits(daily=1.0), Limits(daily=1.0)),
        (Limits(daily=5.0), Limits(daily=1.0, monthly=9.0), Limits(daily=5.0, monthly=9.0)),
        (Limits(per_run=0.1), Limits(), Limits(per_run=0.1)),
    ],
)
def test_a_named_persons_limits_override_the_defaults_one_by_one(
    named: Limits | None, defaults: Limits, expected: Limits
) -> None:
    budgets = Budgets(person=defaults, people={"42": named} if named else {})
    assert budgets.of_person("42") == expected
    assert budgets.of_person("7") == defaults


@pytest.mark.parametrize(
    ("budgets", "enabled"),
    [
        (Budgets(), False),
        (Budgets(chat=Limits(monthly=3.0)), True),
        (Budgets(people={"42": Limits(per_run=1.0)}), True),
    ],
)
def test_budgets_are_on_when_any_limit_is_set(budgets: Budgets, enabled: bool) -> None:
    assert budgets.enabled is enabled


@pytest.mark.parametrize(
    ("limit", "step", "amount"), [(1.0, 0.5, 0.5), (3.0, 0.25, 0.75), (0.01, 0.5, 0.01)]
)
def test_a_raise_adds_a_step_of_the_limit(limit: float, step: float, amount: float) -> None:
    assert raise_amount(limit, step) == amount

"""A stored schedule's rule, and the fields that hold one (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.schedules.when import Cron, Once, Rule, Span

if TYPE_CHECKING:
    from bridge.store.schedule_record import ScheduleRecord


def rule_of(record: ScheduleRecord) -> Rule:
    if record.cron:
        return Cron(record.cron)
    if record.span:
        return Span(record.span)
    return Once(record.at)


def rule_fields(rule: Rule) -> dict[str, object]:
    """The record's fields that hold `rule`."""
    match rule:
        case Cron(expr):
            return {"cron": expr, "span": 0, "at": 0.0}
        case Span(seconds):
            return {"cron": "", "span": seconds, "at": 0.0}
        case Once(at):
            return {"cron": "", "span": 0, "at": at}

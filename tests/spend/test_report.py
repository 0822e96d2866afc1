"""The /usage table: figures as people read them, narrow enough for a phone."""

from __future__ import annotations

import pytest

from bridge.spend.limits import Limits
from bridge.spend.report import Row, money, tokens, usage_table
from bridge.spend.usage import UsageTotals

PHONE = 32  # characters of a monospace line a phone shows without wrapping


@pytest.mark.parametrize(
    ("cost", "shown"),
    [(0.0, "$0"), (0.004, "$0.0040"), (0.01, "$0.01"), (1.234, "$1.23"), (12345.0, "$12,345")],
)
def test_money(cost: float, shown: str) -> None:
    assert money(cost) == shown


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1.0k"),
        (12_345, "12.3k"),
        (123_456, "123k"),
        (4_500_000, "4.5M"),
    ],
)
def test_tokens(count: int, shown: str) -> None:
    assert tokens(count) == shown


def test_the_table_shows_each_subject_by_period_with_its_budget() -> None:
    today = UsageTotals(messages=2, input=1200, output=300, cost=0.42)
    month = UsageTotals(messages=9, input=90_000, output=4000, cache_read=5000, cost=3.2)
    rows = [
        Row("you (alice)", today, today, month, limits=Limits(daily=1.0), raised=0.5),
        Row("this chat", today, month, month),
    ]
    text = usage_table(rows, "UTC")
    block = text.split("```")[1].strip("\n").splitlines()
    assert block[0].split() == ["today", "week", "month"]
    assert block[1] == "you (alice)"
    assert block[2].split() == ["cost", "$0.42", "$0.42", "$3.20"]
    assert block[3].split() == ["in", "1.2k", "1.2k", "90.0k"]
    assert block[5].split() == ["cache", "0", "0", "5.0k"]
    assert max(len(line) for line in block) <= PHONE
    assert "Budget, you (alice): $0.42 of $1.00 today (+$0.50 today)" in text
    assert "Budget, this chat" not in text  # no limits, no line
    assert "(days by UTC)" in text

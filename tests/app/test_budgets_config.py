"""`[budgets]` in the configuration file: limits per person and chat, the time zone,
and what a mistake in them is called."""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import pytest

from bridge.spend.limits import Limits
from tests.app.test_config import load, problems

if TYPE_CHECKING:
    from pathlib import Path

BUDGETS = """
[budgets]
time_zone = "Europe/Berlin"
raise_step = 0.25
[budgets.person]
daily = 2
monthly = 20.5
[budgets.chat]
per_run = 1
[budgets.people."42"]
daily = 10
[budgets.chats."tg:-100"]
monthly = 0
"""


def test_budgets_reach_the_bridge(tmp_path: Path) -> None:
    budgets = load(tmp_path, BUDGETS).options.budgets
    assert budgets.zone == ZoneInfo("Europe/Berlin")
    assert (budgets.zone_name, budgets.raise_step) == ("Europe/Berlin", 0.25)
    assert budgets.of_person("42") == Limits(daily=10.0, monthly=20.5)
    assert budgets.of_person("7") == Limits(daily=2.0, monthly=20.5)
    assert budgets.of_chat("tg:-100") == Limits(monthly=0.0, per_run=1.0)
    assert budgets.of_chat("tg:5") == Limits(per_run=1.0)


def test_no_budgets_is_no_limit(tmp_path: Path) -> None:
    budgets = load(tmp_path, "").options.budgets
    assert (budgets.person, budgets.chat, budgets.people, budgets.chats) == (
        Limits(),
        Limits(),
        {},
        {},
    )
    assert budgets.zone_name == "UTC"
    assert not budgets.enabled


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[budgets]\ntime_zone = "Mars/Olympus"\n', "budgets.time_zone"),
        ("[budgets.person]\ndaily = -1\n", "budgets.person.daily"),
        ("[budgets.person]\nweekly = 3\n", "budgets.person.weekly"),
        ("[budgets]\nraise_step = 0\n", "budgets.raise_step"),
        ('[budgets.chats."telegram:5"]\ndaily = 1\n', 'budgets.chats."telegram:5"'),
    ],
)
def test_a_mistake_in_the_budgets_is_named(tmp_path: Path, toml: str, named: str) -> None:
    assert named in problems(tmp_path, toml)

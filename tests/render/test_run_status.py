"""A run's status line (bridge/render/status.py): once final, nothing reopens it."""

from __future__ import annotations

import itertools

import pytest

from bridge.render.choices import TokenBook
from bridge.render.status import Board, RunStatus


def status() -> RunStatus:
    counter = itertools.count()
    run = RunStatus.begin(1, 0.0, TokenBook(lambda: f"t{next(counter)}", 64))
    run.opening(0.0)
    return run


@pytest.mark.parametrize(
    "end",
    [
        pytest.param(lambda r: r.finish(30.0), id="done"),
        pytest.param(lambda r: r.interrupted(30.0, "the agent stopped"), id="interrupted"),
    ],
)
def test_a_final_line_is_never_followed_by_a_working_one(end: object) -> None:
    run = status()
    assert run.refresh(Board(), 10.0, force=True)  # live: the clock shows
    end(run)  # type: ignore[operator]
    assert run.final is not None
    for now in (31.0, 60.0):
        assert run.refresh(Board(), now, force=True) == []

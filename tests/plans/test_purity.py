"""Importing a pure core of bridge/plans/ loads no I/O, not even through a package's
__init__ (tests/support/purity.py; the "pure-cores" contract in pyproject.toml)."""

from __future__ import annotations

import pytest

from tests.support.purity import forbidden_loads, pure_cores


@pytest.mark.parametrize("module", pure_cores("bridge.plans"))
def test_importing_a_pure_core_alone_loads_nothing_that_does_io(module: str) -> None:
    assert forbidden_loads(module) == []

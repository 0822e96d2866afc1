"""Fixtures of the Telegram end-to-end tests: the bridge's options for the default agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conftest import require_agent
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome


@pytest.fixture
def opts(agent_home: AgentHome, tmp_path: Path) -> BridgeOptions:
    """Options for a bridge running the default pinned agent against the fake LLM."""
    require_agent(DEFAULT_VERSION)
    return options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())

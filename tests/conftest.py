"""Shared fixtures: anyio on asyncio, a started fake LLM, a throwaway agent home."""

from __future__ import annotations

import gc
import logging
import sys
import warnings
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from tests.support.agents import (
    AGENT_VERSIONS,
    CONTAINMENT_VERSIONS,
    SETUP_HINT,
    agent_bin,
    agent_installed,
    make_agent_home,
)
from tests.support.fake_llm import FakeLLM

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Generator
    from pathlib import Path

    from tests.support.agents import AgentHome


def require_agent(version: str) -> None:
    """Fail (never skip) the calling test when the pinned agent is not installed."""
    if not agent_installed(version):
        pytest.fail(
            f"pi agent {version} is not installed at {agent_bin(version)}: {SETUP_HINT}",
            pytrace=False,
        )


@pytest.fixture(params=AGENT_VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    """Each pinned agent version in turn (a test asking for it runs once per agent)."""
    require_agent(request.param)
    return str(request.param)


@pytest.fixture(params=CONTAINMENT_VERSIONS)
def containment_version(request: pytest.FixtureRequest) -> str:
    """Each agent version the containment tests must hold on (the pinned ones and newer)."""
    require_agent(request.param)
    return str(request.param)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A started FakeLLM on 127.0.0.1; script it with `fake_llm.add(...)`."""
    async with FakeLLM() as llm:
        yield llm


@pytest.fixture
def agent_home(tmp_path: Path, fake_llm: FakeLLM) -> AgentHome:
    """HOME and agent config dir under tmp_path, pointing the agents at `fake_llm`."""
    return make_agent_home(tmp_path / "agent-home", fake_llm.base_url)


# A real agent's journey that times out on a loaded machine (CI: two workers on two
# CPUs, each starting bridges, agents and Redis) is tried once more; a test failing
# twice fails. The reruns are listed in the summary ("RERUN"), so they stay visible
# (docs/performance.md, "The test suite").
AGENT_RERUNS = 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One rerun for the tests that drive a real agent (they take `agent_home`), unless
    the plugin is off (`-p no:rerunfailures`: every failure shows at once)."""
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        if "agent_home" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.flaky(reruns=AGENT_RERUNS, reruns_delay=1))


# The bridge's own loggers (and the adapters') at DEBUG in every test: pytest keeps each
# test's records and prints them under "Captured log" when it fails, so a failed journey
# shows how far its messages got (inbound, conversation, agent commands and records,
# outbox calls). Only these: the SDKs' DEBUG (discord.py's gateway, aiohttp) is heavy
# enough to change the timing of what a test is hunting.
KEPT_LOGGERS = ("bridge", "adapters")


@pytest.fixture(autouse=True)
def _bridge_logs_kept() -> Generator[None, None, None]:
    loggers = [logging.getLogger(name) for name in KEPT_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


FAILED_BEFORE = [False]  # the last test of this process failed in its call


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        FAILED_BEFORE[0] = report.failed
    return report


@pytest.fixture(autouse=True)
def _leftovers_of_a_failure_stay_with_it() -> None:
    """A test cut off mid-way (a timeout) leaves clients unclosed, e.g. discord.py's
    HTTP session; collected later, their "unclosed" warning would fail whichever test
    runs then, its own rerun included. After a failure, already told, the next test
    starts by collecting them."""
    if not FAILED_BEFORE[0]:
        return
    FAILED_BEFORE[0] = False
    # pytest keeps the failure's traceback, and with it the test's frames, for a
    # post-mortem until the next test's call: let go of it first.
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many examples the fuzz suite ran, per target (the test_fuzz.py modules)."""
    counts: Counter[str] = Counter(
        getattr(sys.modules.get("tests.support.fuzzing"), "EXAMPLES", {})
    )
    if counts:
        terminalreporter.section("fuzz examples")
        for target, count in sorted(counts.items()):
            terminalreporter.write_line(f"{target}: {count} examples")
        terminalreporter.write_line(f"in all: {counts.total()} examples")

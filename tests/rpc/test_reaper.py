"""The agent's keeper (`bridge/rpc/reaper.py`): nothing the agent starts outlives it.

pi leaves its bash tools running when its stdin closes (it kills them only on
SIGTERM), which is what happens first when the bridge is SIGKILLed. These tests start
the real agents through `spawn`, as the bridge does, and end them in each way the
bridge can: stdin EOF alone, SIGTERM to the group, and the keeper's parent dying.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.commands import Bash, encode_command
from bridge.rpc.env import agent_environment
from bridge.rpc.process import AgentSpec, spawn
from bridge.rpc.reaper import children, parent_of
from tests.support.agents import AGENT_VERSIONS
from tests.support.loopback import until
from tests.support.paths import REPO

if TYPE_CHECKING:
    from anyio.abc import Process

    from tests.support.agents import AgentHome

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the keeper is Linux-only")

TOOL = "sleep 30; echo late"
STARTED = 30.0  # a cold agent start and its first command on a loaded 2-core machine
GONE = 5.0  # the keeper kills leftovers at once; SIGTERM escalates after 2 s


@pytest.mark.parametrize(
    ("stat", "parent"),
    [
        ("42 (bash) S 7 42 42 0 -1 4194560", 7),
        ("42 (a b) S 8 42 42 0", 8),  # a space in the name
        ("42 (x) y) (z) R 9 42 42 0", 9),  # parens in the name: the last one closes it
        ("42 ()) S 1 1 1 0", 1),
    ],
)
def test_the_parent_is_read_after_the_last_paren_of_the_name(stat: str, parent: int) -> None:
    assert parent_of(stat) == parent


def test_children_are_found_by_their_parent_pid_while_they_live() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in children(os.getpid())
        assert child.pid not in children(child.pid)
    finally:
        child.kill()
        child.wait()
    assert child.pid not in children(os.getpid())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("script", "code"),
    [
        ("exit 0", 0),
        ("exit 3", 3),
        ("kill -TERM $$", -signal.SIGTERM),  # a signal death is repeated, not 128+n
        ("kill -KILL $$", -signal.SIGKILL),
        ("setsid sleep 30 & exit 0", 0),  # a leftover in its own session is killed
        ("sleep 30 & exit 0", 0),  # and one in the agent's group too
    ],
)
async def test_the_keeper_exits_as_its_command_did_and_leaves_nothing(
    script: str, code: int, tmp_path: Path
) -> None:
    spec = AgentSpec(argv=["sh", "-c", script], cwd=tmp_path, env={"PATH": os.defpath})
    process = await spawn(spec)
    try:
        with anyio.fail_after(GONE):
            assert await process.wait() == code
        assert not in_workspace(tmp_path)
    finally:
        kill_leftovers(tmp_path)
        await process.aclose()


def in_workspace(workspace: Path) -> dict[int, str]:
    """Live processes whose cwd is `workspace`, pid → command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(entry / "cwd")) == workspace:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                found[int(entry.name)] = b" ".join(argv).decode(errors="replace").strip()
    return found


def tool_running(workspace: Path) -> bool:
    return any(c.startswith("sleep 30") for c in in_workspace(workspace).values())


@pytest.fixture(params=AGENT_VERSIONS)
def spec(request: pytest.FixtureRequest, agent_home: AgentHome, tmp_path: Path) -> AgentSpec:
    from tests.conftest import require_agent

    require_agent(request.param)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = agent_environment(agent_home.env(), [])
    return AgentSpec(argv=agent_home.argv(request.param), cwd=workspace, env=env)


async def started_tool(spec: AgentSpec) -> Process:
    """An agent running a bash tool (the RPC `bash` command: no model needed)."""
    process = await spawn(spec)
    assert process.stdin is not None
    await process.stdin.send(encode_command(Bash(command=TOOL, id="b1")))
    await until(lambda: tool_running(spec.cwd), STARTED)
    return process


def kill_leftovers(workspace: Path) -> None:
    for pid in in_workspace(workspace):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.anyio
@pytest.mark.agent
async def test_an_agent_whose_stdin_closes_mid_tool_leaves_no_tool(spec: AgentSpec) -> None:
    try:
        process = await started_tool(spec)
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(STARTED):
            assert await process.wait() == 0  # pi's own exit code comes through
        # Without the keeper the tool's session stayed: pi exits on EOF and leaves it.
        await until(lambda: not in_workspace(spec.cwd), GONE)
    finally:
        kill_leftovers(spec.cwd)


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_sigterm_to_the_group_ends_agent_and_tool_with_the_agents_code(
    spec: AgentSpec,
) -> None:
    try:
        process = await started_tool(spec)
        os.killpg(process.pid, signal.SIGTERM)
        with anyio.fail_after(STARTED):
            assert await process.wait() == 143  # pi's SIGTERM exit, not the keeper's
        await until(lambda: not in_workspace(spec.cwd), GONE)
    finally:
        kill_leftovers(spec.cwd)


# A stand-in bridge: starts the agent as the bridge does, runs a tool, then waits to be
# killed. Its output says the tool runs.
BRIDGE = textwrap.dedent(
    """
    import anyio, json, sys
    from pathlib import Path
    from bridge.rpc.process import AgentSpec
    from bridge.rpc.commands import Bash, encode_command
    from bridge.rpc.process import spawn

    async def main() -> None:
        spec = AgentSpec(**json.loads(sys.argv[1]))
        process = await spawn(AgentSpec(spec.argv, Path(spec.cwd), spec.env))
        await process.stdin.send(encode_command(Bash(command=sys.argv[2], id="b1")))
        print("started", flush=True)
        await anyio.sleep(3600)

    anyio.run(main)
    """
)


@pytest.mark.anyio
@pytest.mark.agent
async def test_a_killed_bridge_takes_its_agent_and_the_agents_tool_along(
    spec: AgentSpec,
) -> None:
    given = json.dumps({"argv": list(spec.argv), "cwd": str(spec.cwd), "env": dict(spec.env)})
    env = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(REPO)}
    bridge = await anyio.open_process(
        [sys.executable, "-c", BRIDGE, given, TOOL], env=env, stdout=subprocess.PIPE
    )
    try:
        await until(lambda: tool_running(spec.cwd), STARTED)
        bridge.kill()  # SIGKILL: the agent sees stdin EOF and then its keeper's SIGTERM
        await bridge.wait()
        await until(lambda: not in_workspace(spec.cwd), GONE)
    finally:
        with contextlib.suppress(ProcessLookupError):
            bridge.kill()
        await bridge.aclose()
        kill_leftovers(spec.cwd)

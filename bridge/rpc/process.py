"""Starting and ending the agent's OS process.

The agent starts in its own session, one process group that `terminate_group` ends
as a whole; ending is stepwise (close stdin → SIGTERM → SIGKILL), each step bounded,
and the group gets a final SIGKILL.

pi puts each bash tool in a session of its own, out of that group's reach. So on Linux
the agent runs under a small keeper (`reaper.py`) that kills whatever the agent leaves
behind when it exits, and ends the agent when the bridge dies without ending it
(SIGKILL, OOM).

With a `Sandbox` the keeper starts bwrap, which starts the agent in its own namespaces
(`sandbox.py`): keeper → bwrap → agent. The keeper stays outside, where the agent
cannot see it (its argv names the bridge's pid); when bwrap's PID namespace ends, the
kernel ends everything the agent left in it. Without one the keeper drops the agent's
capabilities itself (`--no-caps`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.rpc.errors import AgentStartError
from bridge.rpc.sandbox import Sandbox, bwrap_argv

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from anyio.abc import Process

# pi exits on stdin EOF within ~100 ms when idle; a run being aborted takes longer.
STDIN_CLOSE_WAIT = 3.0
# SIGTERM → exit 143 in well under a second (docs/rpc.md, "Exits").
SIGTERM_WAIT = 3.0
SIGKILL_WAIT = 2.0

# On Linux the agent is started under `reaper.py`, which ends whatever the agent leaves
# behind and ends the agent when the bridge dies (why: see that module). A separate
# process because anyio's open_process takes no preexec_fn (unsafe in a threaded parent
# anyway) and because someone must outlive the agent to clean up after it; it costs
# ~30 ms per agent start and a few MB (docs/performance.md). The kernel signals the
# bridge's death when the *thread* that forked exits: agents are started from the event
# loop's thread, which lives as long as the bridge.
_REAPER = Path(__file__).with_name("reaper.py")


@dataclass(frozen=True)
class AgentSpec:
    """How to start one agent: argv, working directory, the full environment, and the
    sandbox it runs in (None: a plain child process)."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    sandbox: Sandbox | None = None


async def spawn(spec: AgentSpec) -> Process:
    if not spec.argv:
        raise AgentStartError("empty agent command")
    try:
        return await anyio.open_process(
            _command(spec),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.cwd,
            env=dict(spec.env),
            start_new_session=True,
        )
    except OSError as exc:
        raise AgentStartError(f"cannot start {spec.argv[0]!r}: {exc}") from exc


def _command(spec: AgentSpec) -> list[str]:
    keeper_flags, found, command = keeper_arguments(spec)
    if sys.platform != "linux" or not sys.executable:
        return command
    keeper = [sys.executable, "-I", "-S", str(_REAPER), str(os.getpid()), *keeper_flags]
    return [*keeper, found, *command]


def keeper_arguments(spec: AgentSpec) -> tuple[list[str], str, list[str]]:
    """What the keeper is given: its flags, the executable it starts, and its argv
    (bwrap's, with the agent inside, when there is a sandbox)."""
    found = _executable(spec)
    if spec.sandbox is not None:
        # Inside, argv[0] is exec'd as named: the path found here is the same path there.
        command = bwrap_argv(spec.sandbox, spec.cwd, [found, *spec.argv[1:]])
        flags = [*_network_flags(spec.sandbox), "--stdio-fds"]
        if spec.sandbox.user is not None:
            flags.append("--user={}:{}".format(*spec.sandbox.user))
        return flags, command[0], command
    return ["--no-caps"], found, list(spec.argv)


def _network_flags(sandbox: Sandbox) -> list[str]:
    """What the keeper needs to connect an isolated sandbox: pasta, and the ports."""
    if sandbox.network != "isolated":
        return []
    if sandbox.pasta is None:
        raise AgentStartError("an isolated network needs pasta (the Debian package passt)")
    ports = ",".join(str(port) for port in sandbox.host_ports) or "none"
    return [f"--pasta={sandbox.pasta}", f"--host-ports={ports}"]


def _executable(spec: AgentSpec) -> str:
    """argv[0] as exec would find it (the agent's PATH, or a path from its cwd), so a
    missing agent is an `AgentStartError` here rather than a failed exec in the child."""
    name = spec.argv[0]
    if os.sep in name:
        found = shutil.which(spec.cwd / name)
    else:
        found = shutil.which(name, path=spec.env.get("PATH", os.defpath))
    if found is None:
        raise AgentStartError(f"cannot start {name!r}: no such executable file")
    return os.path.abspath(found)


async def terminate_group(process: Process) -> int | None:
    """Close stdin, then SIGTERM, then SIGKILL the group; returns the exit code."""
    if process.stdin is not None:
        with anyio.move_on_after(1):
            await process.stdin.aclose()
    if await _exited_within(process, STDIN_CLOSE_WAIT) is None:
        _signal_group(process.pid, signal.SIGTERM)
        if await _exited_within(process, SIGTERM_WAIT) is None:
            _signal_group(process.pid, signal.SIGKILL)
            await _exited_within(process, SIGKILL_WAIT)
    # Children the agent started (a bash tool's `sleep`) may still hold the group.
    _signal_group(process.pid, signal.SIGKILL)
    return process.returncode


async def _exited_within(process: Process, seconds: float) -> int | None:
    with anyio.move_on_after(seconds):
        return await process.wait()
    return None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)

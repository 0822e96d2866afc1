"""Starting and ending the agent's OS process.

The agent starts in its own session, so it and every command it runs share one
process group that `terminate_group` can end as a whole; ending is stepwise
(close stdin → SIGTERM → SIGKILL), each step bounded, and the group gets a
final SIGKILL so no shell command the agent started outlives it.

On Linux the agent also ends when the bridge dies without ending it (SIGKILL, OOM):
it is started with a parent-death signal (see `_DIE_WITH_PARENT`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from bridge.rpc.errors import AgentStartError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from anyio.abc import Process

# pi exits on stdin EOF within ~100 ms when idle; a run being aborted takes longer.
STDIN_CLOSE_WAIT = 3.0
# SIGTERM → exit 143 in well under a second (OBSERVED.md, "State and sessions").
SIGTERM_WAIT = 3.0
SIGKILL_WAIT = 2.0

# Run as `python -c` before the agent, in the agent's process: asks the kernel for
# SIGTERM when the bridge dies (prctl PR_SET_PDEATHSIG, kept across exec), then execs
# the agent. An orphaned agent exits on stdin EOF by itself, but pi runs each bash
# tool in a session of its own and kills those only on SIGTERM/SIGHUP, so without the
# signal a tool's `sleep` outlives a killed bridge, beyond any process group we could
# kill. A separate step because anyio's open_process takes no preexec_fn (which is
# unsafe in a threaded parent anyway); it costs ~30 ms per agent start and leaves no
# process behind. The kernel sends the signal when the *thread* that forked exits:
# agents are started from the event loop's thread, which lives as long as the bridge.
# The legacy agent has no SIGTERM handler: it dies, its tools' sessions do not.
_DIE_WITH_PARENT = """\
import ctypes, os, sys
ctypes.CDLL(None).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM; best effort: EOF still ends pi
if os.getppid() != int(sys.argv[1]):  # the bridge died before the signal was set
    sys.exit(143)
os.execv(sys.argv[2], sys.argv[3:])
"""


@dataclass(frozen=True)
class AgentSpec:
    """How to start one agent: argv, working directory and the full environment."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)


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
    if sys.platform != "linux" or not sys.executable:
        return list(spec.argv)
    found = _executable(spec)
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), found, *spec.argv]


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

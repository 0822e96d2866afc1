"""Starting and ending the agent's OS process.

The agent starts in its own session, so it and every command it runs share one
process group that `terminate_group` can end as a whole; ending is stepwise
(close stdin → SIGTERM → SIGKILL), each step bounded, and the group gets a
final SIGKILL so no shell command the agent started outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
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
            list(spec.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.cwd,
            env=dict(spec.env),
            start_new_session=True,
        )
    except OSError as exc:
        raise AgentStartError(f"cannot start {spec.argv[0]!r}: {exc}") from exc


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

"""Running git for the bridge: one place that sets its environment, retries on git's
own lock errors, turns failures into messages for people, and guards calls made in
directories an agent writes.

Always `git -C <dir>` with an argv list, never a shell. git's environment is built
from an allowlist (`environment`), so neither the bridge's secrets nor a variable
pointing git at another repository reach it or the programs it starts; messages are
asked for in English (the lock detection and the translations read them).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from bridge.backoff import Backoff

if TYPE_CHECKING:
    from pathlib import Path

# A git command that touches no network: a minute means something is stuck.
GIT_TIMEOUT = 60.0
# Another process's lock is usually held for milliseconds (a commit, a ref update).
LOCK_RETRIES = 5
LOCK_BACKOFF = Backoff(first=0.05, cap=1.0)  # 0.05 s doubling: 1.55 s over the five
_LABEL = re.compile(r"(fatal|error|warning): (.*)")
# For git run by the bridge in a directory an agent writes: nothing found there may
# make git start a program outside the sandbox (a planted fsmonitor, hook or
# submodule). The git dirs themselves come from the environment (`Worktree.admin`).
GUARDED = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "submodule.recurse=false",
    "-c", "core.untrackedCache=false",
    # A root bridge's worktrees belong to the agents' user (bridge/containment/agent_user.py), and
    # git refuses a repository of another owner unless told; the dirs are the bridge's.
    "-c", "safe.directory=*",
)  # fmt: skip
_LOCK_ERRORS = ("could not lock", "cannot lock", "file exists", "index.lock", ".lock'")
# What git inherits from the bridge: finding programs and the user's config (PATH,
# HOME, USER), temp files, time zone, and which config files the operator has git read.
# Nothing else: the bridge's tokens must not reach git, nor whatever git runs.
_INHERITED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "TZ",
        "TMPDIR",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
    }
)


class WorktreeError(Exception):
    """A git operation on a conversation's worktree failed; the message is for people."""


def plain_error(stderr: str) -> str:
    """git's labelled messages ("fatal: …", "error: …") without their labels.

    The unlabelled lines around them are advice written for a terminal user; they are
    kept only when git printed nothing labelled.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    labelled = [match[2] for line in lines if (match := _LABEL.match(line))]
    return "; ".join(labelled or lines) or "no message"


def verb(args: tuple[str, ...]) -> str:
    """The git command in `args`, past any `-c name=value` before it."""
    return next((a for i, a in enumerate(args) if a != "-c" and args[i - 1 : i] != ("-c",)), "")


def is_lock_error(stderr: str) -> bool:
    lowered = stderr.lower()
    return any(marker in lowered for marker in _LOCK_ERRORS)


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """git's environment: the allowlisted part of the bridge's, then `extra`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _INHERITED or name.startswith("LC_")
    }
    # English messages: _is_lock_error and the translations below read them.
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


async def git(
    where: Path, *args: str, env: dict[str, str] | None = None, limit: float = GIT_TIMEOUT
) -> Result:
    """Run git in `where`, retrying while another process holds one of git's locks."""
    for attempt in range(LOCK_RETRIES + 1):
        try:
            with anyio.fail_after(limit):
                done = await anyio.run_process(
                    ["git", "-C", str(where), *args], check=False, env=environment(env)
                )
        except FileNotFoundError as exc:
            raise WorktreeError("git is not installed (no 'git' on PATH)") from exc
        except TimeoutError as exc:
            raise WorktreeError(f"git {verb(args)} took over {limit:.0f} s") from exc
        result = Result(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )
        if result.code == 0 or attempt == LOCK_RETRIES or not is_lock_error(result.err):
            return result
        await anyio.sleep(LOCK_BACKOFF.delay(attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


async def git_ok(where: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git and return its stdout, or raise WorktreeError with its message."""
    result = await git(where, *args, env=env)
    if result.code != 0:
        message = plain_error(result.err)
        if "not a git repository" in message:
            raise WorktreeError(f"{where} is not a git repository")
        raise WorktreeError(f"git {verb(args)} failed in {where}: {message}")
    return result.out

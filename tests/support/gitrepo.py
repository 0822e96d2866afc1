"""Real git repositories for the projects journeys: made with git itself, one commit."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path


def git(where: Path, *args: str) -> str:
    """git in `where` as a test's author; its stdout (a failure raises)."""
    done = subprocess.run(
        ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def make_repo(where: Path) -> Path:
    """A repository at `where` on branch main with README.md committed; its real path."""
    where.mkdir()
    git(where, "init", "-q", "-b", "main")
    (where / "README.md").write_text("hello\n")
    git(where, "add", "README.md")
    git(where, "commit", "-qm", "start")
    return where.resolve()


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git configuration; a fixed identity for commits."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.invalid")

"""The programs the bridge starts besides agents (git, the bwrap probe) get an
environment built from an allowlist: none of the bridge's secrets reach them.

Each secret is put into this process's environment as the operator's would be; what
the child saw is read back from the child itself (git's `!` alias runs `env`; a
stand-in `bwrap` first on PATH writes its environment to a file).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from bridge.containment.sandbox import probe
from bridge.projects.git import environment, git_ok
from tests.support.gitrepo import isolated_git  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from pathlib import Path

SECRETS = {
    "TELEGRAM_BOT_TOKEN": "123:telegram-secret",
    "SLACK_BOT_TOKEN": "xoxb-slack-secret",
    "SLACK_SIGNING_SECRET": "signing-secret",
    "PI_BRIDGE_STORE": "redis://:redis-password@localhost/0",
    "ANTHROPIC_API_KEY": "provider-secret",
    "AWS_SECRET_ACCESS_KEY": "cloud-secret",
}


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.setenv("TZ", "Europe/Paris")


def leaked(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if name in text or value in text]


@pytest.mark.usefixtures("secrets")
def test_gits_environment_holds_only_what_git_needs() -> None:
    env = environment({"GIT_INDEX_FILE": "/x/index"})

    assert leaked(repr(env)) == []
    assert env["PATH"] == os.environ["PATH"]
    assert env["TZ"] == "Europe/Paris"
    assert (env["LC_ALL"], env["GIT_TERMINAL_PROMPT"]) == ("C", "0")
    assert env["GIT_INDEX_FILE"] == "/x/index"


@pytest.mark.anyio
@pytest.mark.usefixtures("secrets")
async def test_a_program_git_starts_sees_none_of_the_bridges_secrets(tmp_path: Path) -> None:
    seen = await git_ok(tmp_path, "-c", "alias.e=!env", "e")

    assert "PATH=" in seen, "the alias did not run: the test would prove nothing"
    assert leaked(seen) == []


@pytest.mark.usefixtures("secrets")
def test_the_bwrap_probe_sees_none_of_the_bridges_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    standin = bin_dir / "bwrap"
    standin.write_text(f'#!/bin/sh\nenv > "{seen}"\n')
    standin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    assert probe() is None

    assert "PATH=" in seen.read_text()
    assert leaked(seen.read_text()) == []

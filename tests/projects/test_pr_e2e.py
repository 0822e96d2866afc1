"""/pr end to end: a whole bridge (recording adapter), the real pi agent in its sandbox,
a real bare repository served over smart HTTP behind basic auth, and the fake GitHub.

The agent changes a file and then tries to push on its own, to the same server, and
shows what it has of git's credentials: it has none. The person asks /pr: a stranger's
press on the commit question is refused; the owner's commits; the agent writes the
title and description, which are shown to confirm; the press opens the request. The
token is then looked for everywhere the agent or a person could read it: the agent's
processes' environments, every file under its worktree, home and session dir, the
bridge's log, and every chat message. It is in none.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge.conversation.dialogs import NOT_YOURS
from bridge.options import AgentOptions, ChatOptions, ProjectOptions, SandboxOptions
from tests.conftest import require_agent
from tests.support.agents import SUITE_USER, llm_ports
from tests.support.bridge_harness import KEY, STRANGER, options, running_bridge
from tests.support.fake_github import FakeGitHub
from tests.support.fake_llm import Reply, ToolCall
from tests.support.git_http import GitHttp
from tests.support.gitrepo import git, make_repo
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"
TOKEN = "ghp-e2e-s3cret-token-98765"
TOKEN_ENV = "PI_TEST_PR_TOKEN"


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it (read from /proc: the sandbox's children too)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def files_holding(top: Path, secret: bytes) -> list[Path]:
    held = []
    for path in top.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if secret in path.read_bytes():
                    held.append(path)
            except OSError:
                continue
    return held


def agent_environments(harness: BridgeHarness) -> list[bytes]:
    conversation = harness.bridge.supervisor.conversations[KEY]
    agent = conversation.agent
    assert agent is not None
    seen = []
    for pid in descendants(agent.pid):
        try:
            seen.append(Path(f"/proc/{pid}/environ").read_bytes())
        except OSError:
            continue
    return seen


async def test_a_branch_becomes_a_pull_request_and_only_the_bridge_holds_the_key(
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    require_agent(VERSION)
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # the bridge's environment, as the operator's
    repo = make_repo(tmp_path / "web")
    (tmp_path / "remote").mkdir()
    bare = tmp_path / "remote" / "web.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    async with GitHttp(bare.parent, token=TOKEN) as server, FakeGitHub(bare, token=TOKEN) as hub:
        fake_llm.add(
            "make version two",
            Reply(tool_calls=[ToolCall("write", {"path": "app.py", "content": "print('v2')\n"})]),
            Reply(
                tool_calls=[
                    ToolCall(
                        "bash",
                        {
                            "command": (
                                f"git push {server.url('web.git')} HEAD:refs/heads/sneaky 2>&1; "
                                "echo env-has:$(env | grep -c -e TOKEN -e PI_TEST); "
                                "git config --show-origin --get-regexp credential 2>&1; "
                                "echo helpers-done"
                            )
                        },
                    )
                ]
            ),
            Reply(text="Version two is written."),
        )
        fake_llm.add(
            "Write a pull request",
            Reply(text="Add version two\n\nThe app prints v2 now, for the release."),
        )
        env = agent_home.env()
        opts = options(
            tmp_path / "data",
            agent_home.argv(VERSION),
            env,
            agent=AgentOptions(
                argv=tuple(agent_home.argv(VERSION)),
                env=dict(env),
                # The agent may reach the git server: only a key would let it push.
                sandbox=SandboxOptions(host_ports=(*llm_ports(env), server.port), user=SUITE_USER),
            ),
            projects={
                "web": ProjectOptions(
                    path=repo,
                    base="main",
                    remote=server.url("web.git"),
                    remote_token_env=TOKEN_ENV,
                    forge="github",
                    forge_api_url=hub.url,
                    forge_repository="acme/web",
                )
            },
            chats={KEY: ChatOptions(project="web", verbosity="off")},
        )
        async with running_bridge(opts) as harness:
            await harness.say("make version two")
            await harness.shown("Version two is written.")
            await harness.idle()
            environments = agent_environments(harness)
            conversation = harness.bridge.supervisor.conversations[KEY]
            record = conversation.record
            assert record is not None
            assert record.checkout is not None
            worktree, branch = Path(record.checkout.path), record.checkout.branch
            agent_tried = len(server.seen)

            await harness.say("/pr")
            await harness.shown("uncommitted file")
            assert "• app.py" in harness.all_text()
            await harness.press("Commit and push", sender=STRANGER)
            await harness.until(lambda: any(a[1] == NOT_YOURS for a in harness.adapter.answers))
            assert "Committed" not in harness.all_text()

            await harness.press("Commit and push")
            await harness.shown("Committed")
            await harness.shown("Open a pull request from")
            await harness.idle()
            question = await harness.shown("Add version two")
            assert "The app prints v2 now" in question
            await harness.press("Open pull request")
            opened = await harness.shown("Opened pull request #1")

            await harness.say("/pr")
            state = await harness.shown("Pull request #1: open")

    [pushed] = {r for r in tool_results(fake_llm) if "helpers-done" in r}
    assert "env-has:0" in pushed
    assert "could not read Username" in pushed  # git found no credential to send
    assert "PI_BRIDGE" not in pushed  # and no helper of the bridge's
    assert "sneaky" not in git(bare, "branch", "--list")
    assert agent_tried > 0, "the agent's push never reached the server: it proves nothing"
    assert all(not header for header in server.seen[:agent_tried])  # it had nothing to send
    assert any(header.startswith("Basic ") for header in server.seen[agent_tried:])

    assert git(bare, "rev-parse", f"refs/heads/{branch}") == git(repo, "rev-parse", branch)
    [pull] = hub.pulls
    assert (pull.title, pull.head, pull.base) == ("Add version two", branch, "main")
    assert "The app prints v2 now" in pull.body
    assert "https://github.example/acme/web/pull/1" in opened
    assert "Nothing new to push" in state

    secret = TOKEN.encode()
    assert environments, "no agent process was found: the scan proves nothing"
    assert all(secret not in environ for environ in environments)
    assert any(b"PATH=" in environ for environ in environments)
    for top in (worktree, tmp_path / "data", agent_home.home):
        assert files_holding(top, secret) == [], top
    assert TOKEN not in caplog.text
    assert "HTTP Request" in caplog.text or "pulls" in str(hub.calls)
    assert TOKEN not in harness.all_text()
    assert all(TOKEN not in text for _, text, _ in harness.adapter.answers)
    assert os.environ[TOKEN_ENV] == TOKEN  # it was there to leak all along

"""/pr's work (bridge/projects/pull_requests.py) on real repositories, without an agent.

The remote is a real bare repository: on disk (no credential), or served over git's
smart HTTP by `git http-backend` behind basic auth (tests/support/git_http.py), which
is what makes git ask the bridge's credential helper for the token. Pull requests go to
the fake GitHub API (tests/support/fake_github.py), which opens one only from a branch
the bare repository has. What happened is read back with git itself.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from bridge.options import AgentOptions, BridgeOptions, ChatOptions, ProjectOptions
from bridge.projects import pull_requests as work
from bridge.projects.git import WorktreeError
from bridge.projects.worktrees import changes
from tests.projects.test_project import Chat, conversation
from tests.support.fake_github import FakeGitHub
from tests.support.git_http import GitHttp
from tests.support.gitrepo import git, isolated_git, make_repo  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.projects.project import Projects

pytestmark = pytest.mark.anyio

KEY = "slack:T1:C2:1700000000.000100"
TOKEN = "ghp-s3cret-push-token-0123456789"
TOKEN_ENV = "PI_TEST_PUSH_TOKEN"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "web")


@pytest.fixture
def bare(tmp_path: Path, repo: Path) -> Path:
    """The remote: a bare clone of the repository (main only)."""
    (tmp_path / "remote").mkdir()
    where = tmp_path / "remote" / "web.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(where))
    return where


def options(tmp_path: Path, repo: Path, **remote: object) -> BridgeOptions:
    return BridgeOptions(
        data_dir=tmp_path / "data",
        agent=AgentOptions(argv=("false",), env={}),
        projects={"web": ProjectOptions(path=repo, base="main", **remote)},  # type: ignore[arg-type]
        chats={"slack:T1:C2": ChatOptions(project="web")},
    )


async def in_worktree(opts: BridgeOptions) -> tuple[Chat, Projects, Path]:
    chat, projects = conversation(opts, KEY)
    return chat, projects, await projects.workspace()


def remote_head(bare: Path, branch: str) -> str:
    return git(bare, "rev-parse", f"refs/heads/{branch}").strip()


# --- committing -----------------------------------------------------------------------


async def test_the_bridge_commits_what_the_agent_left_and_the_worktree_is_clean(
    tmp_path: Path, repo: Path
) -> None:
    opts = options(tmp_path, repo, remote=str(tmp_path / "nowhere.git"))
    _, projects, tree_path = await in_worktree(opts)
    (tree_path / "app.py").write_text("print('hi')\n")
    (tree_path / "README.md").write_text("hello again\n")
    tree = await projects.tree()
    assert tree is not None
    before = git(repo, "rev-parse", tree.branch).strip()

    made = await work.commit(projects, "Say hi")

    assert git(repo, "rev-parse", tree.branch).strip() == made
    assert git(repo, "rev-parse", f"{made}^").strip() == before
    assert git(repo, "log", "-1", "--format=%s", made).strip() == "Say hi"
    shown = git(repo, "show", "--name-only", "--format=", made).split()
    assert sorted(shown) == ["README.md", "app.py"]
    assert (await changes(tree)).paths == ()  # the agent's own git sees it committed
    git(repo, "fsck", "--no-progress")  # the pack the bridge wrote is whole


async def test_a_link_planted_at_objects_pack_is_refused_and_nothing_moves(
    tmp_path: Path, repo: Path
) -> None:
    opts = options(tmp_path, repo, remote=str(tmp_path / "nowhere.git"))
    _, projects, tree_path = await in_worktree(opts)
    tree = await projects.tree()
    assert tree is not None
    (tree_path / "app.py").write_text("x\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pack = tree.common / "objects" / "pack"
    for item in pack.iterdir():
        item.rename(elsewhere / item.name)
    pack.rmdir()
    pack.symlink_to(elsewhere)  # as an agent can: objects/ is writable in its sandbox
    before = git(repo, "rev-parse", tree.branch).strip()
    listed = sorted(p.name for p in elsewhere.iterdir())

    with pytest.raises(WorktreeError, match="objects/pack"):
        await work.commit(projects, "x")

    assert sorted(p.name for p in elsewhere.iterdir()) == listed
    assert git(repo, "rev-parse", tree.branch).strip() == before


# --- pushing and opening --------------------------------------------------------------


async def test_a_branch_is_pushed_its_request_opened_then_updated_and_its_state_read(
    tmp_path: Path, repo: Path, bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    async with FakeGitHub(bare, token=TOKEN) as github:
        opts = options(
            tmp_path, repo, remote=str(bare), remote_token_env=TOKEN_ENV, forge="github",
            forge_api_url=github.url, forge_repository="acme/web",
        )  # fmt: skip
        _, projects, tree_path = await in_worktree(opts)
        (tree_path / "app.py").write_text("v2\n")
        first = await work.commit(projects, "v2")

        done = await work.publish(projects, "Version two", "It is better.")

        tree = await projects.tree()
        assert tree is not None
        assert remote_head(bare, tree.branch) == first
        assert done.opened
        assert done.request is not None
        assert done.request.number == 1
        [pull] = github.pulls
        assert (pull.head, pull.base, pull.title, pull.body) == (
            tree.branch,
            "main",
            "Version two",
            "It is better.",
        )

        (tree_path / "app.py").write_text("v3\n")
        second = await work.commit(projects, "v3")
        again = await work.publish(projects, "ignored", "")

        assert remote_head(bare, tree.branch) == second
        assert not again.opened
        assert again.request is not None
        assert again.request.number == 1
        assert len(github.pulls) == 1
        assert [c for c in github.calls if c[0] == "POST"] == [("POST", "/repos/acme/web/pulls")]

        github.check_runs[second] = [("completed", "success"), ("in_progress", None)]
        request, checks = await work.state(projects, 1)
        assert (request.state, checks) == ("open", "pending")
        github.check_runs[second] = [("completed", "failure")]
        assert (await work.state(projects, 1))[1] == "failing"
        pull.merged = True
        assert (await work.state(projects, 1))[0].state == "merged"


async def test_nothing_to_push_is_said_and_nothing_is_sent(
    tmp_path: Path, repo: Path, bare: Path
) -> None:
    opts = options(tmp_path, repo, remote=str(bare), forge="none")
    _, projects, _ = await in_worktree(opts)

    with pytest.raises(work.PushError) as refused:
        await work.publish(projects, "t", "")

    assert refused.value.kind == "nothing"
    assert git(bare, "branch", "--list", "pi/*").strip() == ""


async def test_a_remote_on_no_forge_gets_the_push_only(
    tmp_path: Path, repo: Path, bare: Path
) -> None:
    opts = options(tmp_path, repo, remote=str(bare))  # a path: no forge is guessed
    _, projects, tree_path = await in_worktree(opts)
    (tree_path / "new.txt").write_text("n\n")
    made = await work.commit(projects, "n")

    done = await work.publish(projects, "t", "")

    assert (done.request, done.commit) == (None, made)
    tree = await projects.tree()
    assert tree is not None
    assert remote_head(bare, tree.branch) == made


async def test_a_conflict_with_the_remotes_base_names_the_files_and_pushes_nothing(
    tmp_path: Path, repo: Path, bare: Path
) -> None:
    opts = options(tmp_path, repo, remote=str(bare), forge="none")
    _, projects, tree_path = await in_worktree(opts)
    (tree_path / "README.md").write_text("ours\n")
    await work.commit(projects, "ours")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(bare), str(other))
    (other / "README.md").write_text("theirs\n")
    git(other, "commit", "-qam", "theirs")
    git(other, "push", "-q", "origin", "main")
    theirs = git(other, "rev-parse", "HEAD").strip()
    objects = repo / ".git" / "objects"
    loose_before = sorted(str(p) for p in objects.glob("??/*"))
    refs_before = git(repo, "for-each-ref")

    with pytest.raises(work.Conflict) as refused:
        await work.publish(projects, "t", "")

    assert refused.value.files == ("README.md",)
    assert refused.value.commit == theirs
    assert git(bare, "branch", "--list", "pi/*").strip() == ""
    # The remote's base reached the repository as one pack (for the agent to rebase
    # onto), and nothing else: no loose object of the merge, no ref, no FETCH_HEAD.
    git(repo, "cat-file", "-e", f"{theirs}^{{commit}}")
    assert sorted(str(p) for p in objects.glob("??/*")) == loose_before
    assert git(repo, "for-each-ref") == refs_before
    assert not (repo / ".git" / "FETCH_HEAD").exists()


# --- the key --------------------------------------------------------------------------


async def test_over_https_the_token_reaches_git_only_through_the_bridges_helper(
    tmp_path: Path, repo: Path, bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with GitHttp(bare.parent, token=TOKEN) as server:
        opts = options(
            tmp_path, repo, remote=server.url("web.git"), remote_token_env=TOKEN_ENV,
            forge="none",
        )  # fmt: skip
        _, projects, tree_path = await in_worktree(opts)
        (tree_path / "app.py").write_text("v2\n")
        made = await work.commit(projects, "v2")

        with pytest.raises(work.PushError) as unset:  # the variable is not set
            await work.publish(projects, "t", "")
        monkeypatch.setenv(TOKEN_ENV, "wrong-token")
        with pytest.raises(work.PushError) as wrong:
            await work.publish(projects, "t", "")
        monkeypatch.setenv(TOKEN_ENV, TOKEN)
        done = await work.publish(projects, "t", "")

    assert (unset.value.kind, wrong.value.kind) == ("access", "access")
    assert TOKEN_ENV in str(unset.value)
    assert "wrong-token" not in str(wrong.value)
    assert server.refused >= 2  # git asked without, then with the wrong one
    tree = await projects.tree()
    assert tree is not None
    assert done.commit == made
    assert remote_head(bare, tree.branch) == made
    assert TOKEN not in os.environ.get("GIT_CONFIG_PARAMETERS", "")
    assert TOKEN not in " ".join(f"{k}={v}" for k, v in os.environ.items() if k != TOKEN_ENV)


async def test_a_protected_branch_is_told_as_such(
    tmp_path: Path, repo: Path, bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'GH006: Protected branch update failed' >&2\nexit 1\n")
    hook.chmod(0o755)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    async with GitHttp(bare.parent, token=TOKEN) as server:
        opts = options(
            tmp_path, repo, remote=server.url("web.git"), remote_token_env=TOKEN_ENV,
            forge="none",
        )  # fmt: skip
        _, projects, tree_path = await in_worktree(opts)
        (tree_path / "app.py").write_text("v2\n")
        await work.commit(projects, "v2")
        with pytest.raises(work.PushError) as refused:
            await work.publish(projects, "t", "")

    assert refused.value.kind == "protected", str(refused.value)
    assert "Protected branch" in str(refused.value)


def test_the_bridges_git_never_carries_the_token_on_its_command_line() -> None:
    from bridge.projects.push import PUSH_GUARD, Remote

    remote = Remote("https://example.invalid/a/b.git", TOKEN, "x-access-token")
    assert TOKEN not in " ".join(PUSH_GUARD)
    assert remote.env()["PI_BRIDGE_GIT_TOKEN"] == TOKEN
    assert remote.redact(f"fatal: {TOKEN} bad") == "fatal: *** bad"
    # The helper prints the variable for "get" only.
    helper = PUSH_GUARD[PUSH_GUARD.index("credential.helper=") + 2].removeprefix(
        "credential.helper=!"
    )
    env = {"PATH": os.environ["PATH"], **remote.env()}
    got = subprocess.run(
        ["sh", "-c", helper + ' "$@"', "helper", "get"], env=env, capture_output=True, text=True
    )
    stored = subprocess.run(
        ["sh", "-c", helper + ' "$@"', "helper", "store"], env=env, capture_output=True, text=True
    )
    assert got.stdout == f"username=x-access-token\npassword={TOKEN}\n"
    assert stored.stdout == ""


async def test_the_git_holding_the_token_and_what_it_starts_are_not_dumpable(
    tmp_path: Path,
) -> None:
    from bridge.projects.git import git_ok
    from bridge.projects.push import Remote
    from bridge.rpc import nodump

    assert nodump.library() is not None, nodump.missing_reason()
    asked = 'import ctypes; print("dumpable", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'
    alias = f"alias.d=!python3 -c '{asked}'"
    with_token = Remote("https://example.invalid/a.git", TOKEN, "u").env()
    without = Remote("/srv/a.git", None, "u").env()

    assert "dumpable 0" in await git_ok(tmp_path, "-c", alias, "d", env=with_token)
    assert "dumpable 1" in await git_ok(tmp_path, "-c", alias, "d", env=without)

"""/pr as the chat sees it, through a whole bridge (recording adapter) with no agent
started: each refusal is said plainly, a push waits for the owner's press, and a
conflict with the remote's base names its files and offers the agent's help."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.dialogs import NOT_YOURS
from bridge.options import ChatOptions, ProjectOptions
from tests.support.bridge_harness import KEY, STRANGER, options, running_bridge
from tests.support.gitrepo import git, isolated_git, make_repo  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions

pytestmark = pytest.mark.anyio


def bridge_options(tmp_path: Path, remote: str, **more: str) -> BridgeOptions:
    repo = make_repo(tmp_path / "web")
    project = ProjectOptions(path=repo, base="main", remote=remote, forge="none", **more)  # type: ignore[arg-type]
    return options(
        tmp_path / "data",
        ["false"],
        {},
        projects={"web": project},
        chats={KEY: ChatOptions(verbosity="off")},
    )


def bare_of(tmp_path: Path) -> Path:
    (tmp_path / "remote").mkdir()
    bare = tmp_path / "remote" / "web.git"
    git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "web"), str(bare))
    return bare


async def test_pr_outside_a_project_says_how_to_get_one(tmp_path: Path) -> None:
    async with running_bridge(bridge_options(tmp_path, "origin")) as harness:
        await harness.say("/pr")
        await harness.shown("no worktree: /pr pushes a project's branch")


async def test_a_repository_without_the_remote_is_refused_before_anything(tmp_path: Path) -> None:
    async with running_bridge(bridge_options(tmp_path, "origin")) as harness:
        await harness.say("/project web")
        await harness.shown("📁 Project web")
        await harness.say("/pr A title")
        await harness.shown("the repository has no remote named origin")


async def test_a_missing_token_is_named_and_nothing_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PI_TEST_NO_TOKEN", raising=False)
    opts = bridge_options(
        tmp_path, "https://example.invalid/a/b.git", remote_token_env="PI_TEST_NO_TOKEN"
    )
    async with running_bridge(opts) as harness:
        await harness.say("/project web")
        await harness.shown("📁 Project web")
        await harness.say("/pr A title")
        await harness.shown("PI_TEST_NO_TOKEN is not set in the bridge's environment")
        assert harness.find("Open a pull request") is None


async def test_nothing_to_push_is_said_after_the_press(tmp_path: Path) -> None:
    opts = bridge_options(tmp_path, str(tmp_path / "remote" / "web.git"))
    bare_of(tmp_path)
    async with running_bridge(opts) as harness:
        await harness.say("/project web")
        await harness.shown("📁 Project web")
        await harness.say("/pr A title\nWith a description.")
        question = await harness.shown("Open a pull request from")
        assert "A title" in question
        assert "With a description." in question
        await harness.press("Open pull request", sender=STRANGER)
        await harness.until(lambda: any(a[1] == NOT_YOURS for a in harness.adapter.answers))
        await harness.press("Open pull request")
        await harness.shown("⚠️ Nothing to push")


async def test_a_conflict_names_its_files_and_offers_the_agents_help(tmp_path: Path) -> None:
    opts = bridge_options(tmp_path, str(tmp_path / "remote" / "web.git"))
    bare = bare_of(tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(bare), str(other))
    (other / "README.md").write_text("theirs\n")
    git(other, "commit", "-qam", "theirs")
    git(other, "push", "-q", "origin", "main")
    async with running_bridge(opts) as harness:
        await harness.say("/project web")
        await harness.shown("📁 Project web")
        record = harness.bridge.supervisor.conversations[KEY].record
        assert record is not None
        assert record.checkout is not None
        worktree = tmp_path / record.checkout.path
        (worktree / "README.md").write_text("ours\n")
        await harness.say("/pr Ours")
        await harness.shown("1 uncommitted file:\n• README.md")
        await harness.press("Commit and push")
        question = await harness.shown("Not pushed: the branch conflicts with main in README.md")
        assert "Ask the agent" in str(await harness.button("Ask the agent"))
        await harness.press("Not now")
        await harness.shown("Left as it is")
        assert "Committed" in harness.all_text()
        assert question
    assert git(bare, "branch", "--list", "pi/*").strip() == ""


async def test_edit_shows_the_draft_and_how_to_send_your_own_words(tmp_path: Path) -> None:
    opts = bridge_options(tmp_path, str(tmp_path / "remote" / "web.git"))
    bare_of(tmp_path)
    async with running_bridge(opts) as harness:
        await harness.say("/project web")
        await harness.shown("📁 Project web")
        await harness.say("/pr First try\nSome words.")
        await harness.shown("Open a pull request from")
        await harness.press("Edit…")
        said = await harness.shown("To use your own words, send /pr")
        assert "First try\n\nSome words." in said
        await harness.say("/pr Second try")
        question = await harness.shown("Second try")
        assert "Open a pull request from" in question
        await harness.press("Cancel", contains="Second try")
        await harness.shown("Cancelled: nothing pushed.")
        record = harness.bridge.supervisor.conversations[KEY].record
        assert record is not None
        assert record.pull_request is not None
        assert (record.pull_request.title, record.pull_request.pushed) == ("Second try", "")

"""Conversations get their own git worktree and branch, and git itself agrees.

Branch names are checked with the real `git check-ref-format`; everything else runs
against throwaway repositories made here, with the user's git configuration shut out
(GIT_CONFIG_GLOBAL/NOSYSTEM) so a signing hook or a default branch name cannot leak in.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.projects.git import WorktreeError, plain_error
from bridge.projects.snapshots import diff
from bridge.projects.worktrees import (
    MAX_SLUG,
    branch_name,
    changes,
    ensure_worktree,
    is_repository,
    parse_status,
    remove_worktree,
    slug,
)
from tests.support.gitrepo import isolated_git  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.projects.worktrees import Worktree

pytestmark = pytest.mark.anyio

HOSTILE_KEYS = [
    "tg:-1001234:7",
    "slack:T1:C2:1700000000.123456",
    "console",
    "",
    "with spaces and\ttabs",
    "a..b",
    "@{-1}",
    "@",
    "branch.lock",
    "x/../../etc",
    "-leading-dash",
    ".hidden",
    "ends.",
    "ctrl\x00\x01\x7fchars",
    "ünïcödé:会話:🙂",
    "\ud800lone surrogate",
    "star*question?bracket[tilde~caret^colon:back\\slash",
    "k" * 500,
    "tg:" + "9" * 300,
]


def check_ref_format(name: str) -> bool:
    done = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, check=False
    )
    return done.returncode == 0 and done.stdout.decode().strip() == name


def git_sync(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, check=True, text=True
    )
    return done.stdout


async def git(where: Path, *args: str) -> str:
    done = await anyio.run_process(["git", "-C", str(where), *args])
    return done.stdout.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:  # after isolated_git: autouse fixtures come first
    """A repository on `main` with one commit holding README and app.py."""
    path = tmp_path / "repo"
    path.mkdir()
    git_sync(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    (path / "app.py").write_text("print('v1')\n")
    git_sync(path, "add", ".")
    git_sync(path, "commit", "-q", "-m", "first")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "worktrees"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("console", "pi/console"),
        ("tg-7", "pi/tg-7"),
        ("tg:-1001234:7", "pi/tg-1001234-7_"),
        ("slack:T1:C2:1700000000.123456", "pi/slack-t1-c2-1700000000-123456_"),
        ("Console", "pi/console_"),
        ("", "pi/key_"),
        ("@{-1}", "pi/1_"),
    ],
    ids=[
        "a plain key is kept as it is",
        "a dash is kept",
        "a telegram key reads well and is hashed for the lost colons",
        "a slack key reads well and is hashed for the lost dots",
        "upper case is lossy, so it is hashed",
        "an empty key gets a placeholder and a hash",
        "reflog syntax is dropped",
    ],
)
def test_branch_names_read_like_the_key(key: str, expected: str) -> None:
    name = branch_name(key)
    assert name.startswith(expected)
    assert name == expected or len(name) == len(expected) + 12


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_every_branch_name_passes_git_check_ref_format(key: str) -> None:
    name = branch_name(key)
    assert check_ref_format(name), name
    assert len(name) <= len("pi/") + MAX_SLUG + 13
    assert "/" not in slug(key)
    assert not slug(key).startswith((".", "-"))


@settings(max_examples=40, deadline=None)
@given(st.text())
def test_any_key_gives_a_valid_branch_name(key: str) -> None:
    assert check_ref_format(branch_name(key))


def test_similar_keys_never_share_a_name() -> None:
    similar = [
        "tg:-1001234:7",
        "tg:1001234:7",
        "tg-1001234-7",
        "tg:-1001234-7",
        "TG:-1001234:7",
        "tg:-1001234:7 ",
        "tg:-1001234:7.",
        "tg--1001234--7",
        "k" * 500,
        "k" * 501,
        "tg:" + "9" * 300 + "1",
        "tg:" + "9" * 300 + "2",
        *HOSTILE_KEYS,
    ]
    keys = list(dict.fromkeys(similar))
    assert len({branch_name(key) for key in keys}) == len(keys)


@pytest.mark.parametrize("prefix", ["", "PI/", "pi", "pi//", "../", "pi/x.lock/"])
def test_a_prefix_that_is_not_lower_case_words_is_refused(prefix: str) -> None:
    if prefix == "":
        assert branch_name("console", prefix) == "console"
    else:
        with pytest.raises(ValueError, match="prefix"):
            branch_name("console", prefix)


@pytest.mark.parametrize(
    ("porcelain", "expected"),
    [
        ("", ()),
        (" M app.py\0", ("app.py",)),
        ("?? new file.txt\0 D gone\0", ("new file.txt", "gone")),
        ("R  new\0old\0A  added\0", ("new", "added")),
    ],
    ids=["clean", "modified", "untracked and deleted", "rename source skipped"],
)
def test_status_entries_become_paths(porcelain: str, expected: tuple[str, ...]) -> None:
    assert parse_status(porcelain) == expected


@pytest.mark.parametrize(
    ("stderr", "plain"),
    [
        ("fatal: not a git repository\n", "not a git repository"),
        ("error: one\nfatal: two\n", "one; two"),
        ("fatal: cannot lock ref\n\nAnother git process seems to be running\n", "cannot lock ref"),
        ("usage: git worktree add\n", "usage: git worktree add"),
        ("", "no message"),
    ],
)
def test_git_labels_are_dropped_from_messages(stderr: str, plain: str) -> None:
    assert plain_error(stderr) == plain


async def test_two_conversations_get_separate_worktrees(repo: Path, root: Path) -> None:
    one = await ensure_worktree(repo, root, "tg:-100:1")
    two = await ensure_worktree(repo, root, "tg:-100:2")
    assert one.path != two.path
    assert one.branch != two.branch
    assert (one.base, two.base) == ("main", "main")
    (one.path / "only-here.txt").write_text("one\n")
    assert not (two.path / "only-here.txt").exists()
    assert (await git(two.path, "branch", "--show-current")).strip() == two.branch


async def test_ensuring_twice_returns_the_same_worktree(repo: Path, root: Path) -> None:
    first = await ensure_worktree(repo, root, "slack:T1:C2:17.5")
    second = await ensure_worktree(repo, root, "slack:T1:C2:17.5")
    assert first == second


async def test_a_base_branch_is_forked_from_and_remembered(repo: Path, root: Path) -> None:
    await git(repo, "branch", "develop")
    made = await ensure_worktree(repo, root, "console", base="develop")
    await remove_worktree(repo, made)
    again = await ensure_worktree(repo, root, "console")
    assert again.base == "develop"


async def test_the_diff_shows_committed_uncommitted_and_untracked_work(
    repo: Path, root: Path
) -> None:
    worktree = await ensure_worktree(repo, root, "tg:-100:1")
    (worktree.path / "committed.txt").write_text("saved\n")
    await git(worktree.path, "add", "committed.txt")
    await git(worktree.path, "commit", "-q", "-m", "agent work")
    (worktree.path / "app.py").write_text("print('v2')\n")
    (worktree.path / "untracked.txt").write_text("fresh\n")
    # Meanwhile main moves on: that is not the conversation's change.
    (repo / "README").write_text("changed on main\n")
    await git(repo, "commit", "-q", "-am", "main moves")

    result = await diff(worktree, root.parent / "scratch")

    assert result.files == 3
    for name in ("committed.txt", "app.py", "untracked.txt"):
        assert name in result.stat
        assert f"+++ b/{name}" in result.patch
    assert "+print('v2')" in result.patch
    assert "README" not in result.patch
    # The agent's own index is untouched: the new file is still untracked.
    assert (await changes(worktree)).paths == ("app.py", "untracked.txt")


async def test_a_fresh_worktree_has_no_changes_and_an_empty_diff(repo: Path, root: Path) -> None:
    worktree = await ensure_worktree(repo, root, "console")
    assert not (await changes(worktree)).dirty
    assert (await diff(worktree, root.parent / "scratch")).files == 0


async def removed(repo: Path, worktree: Worktree) -> bool:
    listing = await git(repo, "worktree", "list", "--porcelain")
    metadata = repo / ".git" / "worktrees"
    leftover = list(metadata.iterdir()) if metadata.exists() else []
    return str(worktree.path) not in listing and not leftover and not worktree.path.exists()


async def test_removal_refuses_uncommitted_work_unless_forced(repo: Path, root: Path) -> None:
    worktree = await ensure_worktree(repo, root, "tg:-100:1")
    (worktree.path / "draft.txt").write_text("unsaved\n")
    with pytest.raises(WorktreeError, match=r"uncommitted changes \(draft.txt\)"):
        await remove_worktree(repo, worktree)
    assert worktree.path.exists()

    await remove_worktree(repo, worktree, force=True)

    assert await removed(repo, worktree)
    assert worktree.branch in await git(repo, "branch", "--list", worktree.branch)


async def test_removal_deletes_the_branch_when_asked(repo: Path, root: Path) -> None:
    worktree = await ensure_worktree(repo, root, "tg:-100:1")
    await remove_worktree(repo, worktree, delete_branch=True)
    assert await removed(repo, worktree)
    assert await git(repo, "branch", "--list", worktree.branch) == ""


async def test_a_kept_branch_is_checked_out_again_with_its_commits(repo: Path, root: Path) -> None:
    worktree = await ensure_worktree(repo, root, "tg:-100:1")
    (worktree.path / "kept.txt").write_text("kept\n")
    await git(worktree.path, "add", "kept.txt")
    await git(worktree.path, "commit", "-q", "-m", "keep")
    await remove_worktree(repo, worktree)
    again = await ensure_worktree(repo, root, "tg:-100:1")
    assert (again.path / "kept.txt").read_text() == "kept\n"


async def test_a_worktree_deleted_by_hand_is_made_again(repo: Path, root: Path) -> None:
    worktree = await ensure_worktree(repo, root, "console")
    shutil.rmtree(worktree.path)
    again = await ensure_worktree(repo, root, "console")
    assert again.path.is_dir()


async def test_twenty_conversations_at_once_all_get_a_worktree(repo: Path, root: Path) -> None:
    made: list[Worktree] = []

    async def one(number: int) -> None:
        made.append(await ensure_worktree(repo, root, f"tg:-100:{number}"))

    async with anyio.create_task_group() as tg:
        for number in range(20):
            tg.start_soon(one, number)

    assert len({worktree.branch for worktree in made}) == 20
    listing = await git(repo, "worktree", "list", "--porcelain")
    assert listing.count("worktree ") == 21


async def test_a_path_that_is_no_repository_is_named_in_the_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="is not a git repository"):
        await ensure_worktree(plain, tmp_path / "wt", "console")


async def test_a_missing_base_branch_is_named_in_the_error(repo: Path, root: Path) -> None:
    with pytest.raises(WorktreeError, match="base branch 'nope' not found"):
        await ensure_worktree(repo, root, "console", base="nope")


async def test_only_the_top_of_a_work_tree_is_a_repository(repo: Path, tmp_path: Path) -> None:
    (repo / "sub").mkdir()
    assert await is_repository(repo)
    assert not await is_repository(repo / "sub")
    assert not await is_repository(tmp_path)
    assert not await is_repository(tmp_path / "missing")


async def test_a_lock_held_for_a_moment_by_another_process_is_waited_out(
    repo: Path, root: Path
) -> None:
    # What a concurrent `git branch` elsewhere leaves while it writes the same ref.
    held = repo / ".git" / "refs" / "heads" / "pi" / "console.lock"
    held.parent.mkdir(parents=True)
    held.write_text("")

    async def release() -> None:
        # Well after the first attempt (a handful of git calls come before it), well
        # before the last retry (LOCK_BACKOFF doubled five times: 1.55 s).
        await anyio.sleep(0.4)
        held.unlink()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release)
        worktree = await ensure_worktree(repo, root, "console")

    assert (await git(worktree.path, "branch", "--show-current")).strip() == "pi/console"

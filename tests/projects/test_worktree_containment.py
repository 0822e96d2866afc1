"""git run by the bridge stays inside what the bridge made, whatever the agent planted.

The agent (taken as hostile) can write its worktree, the worktree's `.git` file, its
admin dir `<common>/worktrees/<name>` and the repository's shared objects, refs and
logs. Each test plants there what a prompt-injected agent could, with plain file
operations, and checks what happened outside: a file standing for the bridge's store
keeps its bytes, another conversation's worktree comes and goes whatever this one's
agent links its `gitdir` to, an uncommitted file's blob never reaches the shared
object store, and a planted index neither leaks a hidden file nor fills the disk.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from bridge.projects.git import WorktreeError
from bridge.projects.snapshots import diff, snapshot
from bridge.projects.worktrees import changes, ensure_worktree, remove_worktree
from tests.support.gitrepo import git, isolated_git, make_repo  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from bridge.projects.worktrees import Worktree

pytestmark = pytest.mark.anyio

KEY = "tg:-100:1"
STORE_BYTES = b"SQLite format 3\x00the bridge's store\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """What stands for the bridge's own files, which no agent may reach."""
    where = tmp_path / "outside"
    where.mkdir()
    (where / "store.sqlite3").write_bytes(STORE_BYTES)
    (where / "keep.txt").write_text("the bridge's\n")
    return where


@pytest.fixture
def small_files() -> Iterator[None]:
    """A file this process (and git under it) writes stops at 8 MiB: a regression that
    copies /dev/zero fails the test with EFBIG instead of filling the shared disk."""
    limit = 8 * 2**20
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def untouched(outside: Path) -> bool:
    """Whether the bridge's files are as they were: not written, none added."""
    names = sorted(path.name for path in outside.iterdir())
    return (outside / "store.sqlite3").read_bytes() == STORE_BYTES and names == [
        "keep.txt",
        "store.sqlite3",
    ]


def gone(*paths: Path) -> bool:
    return not any(os.path.lexists(path) for path in paths)


def admin_of(repo: Path, worktree: Worktree) -> Path:
    return repo / ".git" / "worktrees" / worktree.path.name


def agent_git(worktree: Path, *args: str) -> str:
    """git as the agent runs it in its worktree: through whatever `.git` it finds there."""
    return git(worktree, *args)


# --- 1. removal walks no admin dir and follows no link -------------------------------


def git_file_kept(worktree: Path, elsewhere: Path) -> None:
    """The `.git` file is left as git wrote it."""


def git_file_elsewhere(worktree: Path, elsewhere: Path) -> None:
    (worktree / ".git").write_text(f"gitdir: {elsewhere}\n")


def git_dir_of_its_own(worktree: Path, elsewhere: Path) -> None:
    (worktree / ".git").unlink()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)


GIT_ENTRIES: dict[str, Callable[[Path, Path], None]] = {
    "the .git file as git wrote it": git_file_kept,
    "a .git file pointing elsewhere": git_file_elsewhere,
    "a repository of its own in .git": git_dir_of_its_own,
}


@pytest.mark.parametrize("discard", [False, True], ids=["keep the branch", "discard"])
@pytest.mark.parametrize("entry", GIT_ENTRIES.values(), ids=GIT_ENTRIES.keys())
async def test_removal_never_writes_through_links_planted_in_the_admin_dir_or_worktree(
    repo: Path,
    tmp_path: Path,
    outside: Path,
    entry: Callable[[Path, Path], None],
    discard: bool,
) -> None:
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    admin = admin_of(repo, worktree)
    (admin / "gitdir").unlink()
    (admin / "gitdir").symlink_to(outside / "store.sqlite3")  # `worktree repair` rewrites it
    (admin / "planted").symlink_to(outside)
    (worktree.path / "planted").symlink_to(outside)
    entry(worktree.path, tmp_path / "elsewhere")

    await remove_worktree(repo, worktree, force=True, delete_branch=discard)

    assert untouched(outside)
    assert gone(worktree.path, admin)
    branches = git(repo, "branch", "--list", worktree.branch, "--format=%(refname:short)")
    assert branches.split() == ([] if discard else [worktree.branch])


async def test_a_worktree_path_that_became_a_link_is_not_followed(
    repo: Path, tmp_path: Path, outside: Path
) -> None:
    # Not the agent's doing (the worktree root is outside its sandbox), but whatever
    # put it there, the bridge removes only the directory it made.
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    shutil.rmtree(worktree.path)
    worktree.path.symlink_to(outside)

    with pytest.raises(WorktreeError, match="not the directory the bridge made"):
        await remove_worktree(repo, worktree, force=True)

    assert untouched(outside)


async def test_a_worktree_the_agent_locked_itself_out_of_is_still_removed(
    repo: Path, tmp_path: Path
) -> None:
    # Root ignores these modes: run as another user, or as root without
    # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER (setpriv --bounding-set),
    # for this test to tell anything.
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    (worktree.path / "sealed").mkdir()
    (worktree.path / "sealed" / "inside.txt").write_text("x\n")
    (worktree.path / "sealed").chmod(0)
    worktree.path.chmod(0o500)

    await remove_worktree(repo, worktree, force=True, delete_branch=True)

    assert gone(worktree.path)


@pytest.fixture
def small_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git (the bridge's too: it finds git on PATH) may take 1 GiB of memory, no more: a
    regression that lets git read a planted /dev/zero fails the test, not the machine."""
    real = shutil.which("git")
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nulimit -v 1048576\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.usefixtures("small_git")
async def test_another_agents_endless_gitdir_stops_no_conversation_from_coming_or_going(
    repo: Path, tmp_path: Path
) -> None:
    # git's own `worktree add`, `list`, `prune` and `branch -D` read every admin dir's
    # `gitdir` whole: one linked to /dev/zero takes all the memory there is.
    root = tmp_path / "worktrees"
    other = await ensure_worktree(repo, root, "tg:-100:2")
    worktree = await ensure_worktree(repo, root, KEY)
    gitdir = admin_of(repo, other) / "gitdir"
    gitdir.unlink()
    gitdir.symlink_to("/dev/zero")

    await remove_worktree(repo, worktree, force=True, delete_branch=True)
    again = await ensure_worktree(repo, root, KEY)

    assert (again.path / "README.md").read_text() == "hello\n"
    assert git(again.path, "branch", "--show-current").strip() == again.branch
    assert gitdir.is_symlink(), "the other conversation's admin dir was removed"


# --- 2. whatever the agent did to its worktree's git, it can be removed ---------------


def moved_aside(worktree: Path) -> None:
    """`mv .git .git-orig && git init`: the worktree's files are its own repo's now."""
    (worktree / ".git").rename(worktree / ".git-orig")
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)


def replaced(worktree: Path) -> None:
    """`rm -rf .git && git init`."""
    (worktree / ".git").unlink()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)


def other_branch(worktree: Path) -> None:
    agent_git(worktree, "switch", "-q", "-c", "agent-own")


def detached(worktree: Path) -> None:
    agent_git(worktree, "switch", "-q", "--detach")


WRECKS: dict[str, Callable[[Path], None]] = {
    "mv .git .git-orig && git init": moved_aside,
    "rm -rf .git && git init": replaced,
    "git switch -c another branch": other_branch,
    "git switch --detach": detached,
}


@pytest.mark.parametrize("wreck", WRECKS.values(), ids=WRECKS.keys())
async def test_a_worktree_whose_git_the_agent_changed_is_found_and_removed(
    repo: Path, tmp_path: Path, wreck: Callable[[Path], None]
) -> None:
    root = tmp_path / "worktrees"
    worktree = await ensure_worktree(repo, root, KEY)
    wreck(worktree.path)

    again = await ensure_worktree(repo, root, KEY)  # a restarted bridge finds it
    await changes(again)
    await remove_worktree(repo, again, force=True, delete_branch=True)

    assert gone(worktree.path, admin_of(repo, worktree))
    assert git(repo, "branch", "--list", "pi/*") == ""
    fresh = await ensure_worktree(repo, root, KEY)
    assert (fresh.path / "README.md").read_text() == "hello\n"


async def test_a_replaced_git_counts_as_a_change_so_it_is_never_dropped_unasked(
    repo: Path, tmp_path: Path
) -> None:
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    replaced(worktree.path)
    assert ".git" in (await changes(worktree)).paths


# --- 3. a snapshot puts nothing into the objects every agent reads --------------------


def stored(repo: Path, content: bytes) -> bool:
    """Whether the shared object store holds a blob of `content`."""
    blob = subprocess.run(
        ["git", "hash-object", "--stdin"], input=content, capture_output=True, check=True
    ).stdout.decode()
    found = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", blob.strip()], check=False)
    return found.returncode == 0


async def test_a_snapshot_leaves_no_blob_of_uncommitted_files_in_the_shared_store(
    repo: Path, tmp_path: Path
) -> None:
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    secret, edited = b"conversation A's secret\n", b"print('unsaved edit')\n"
    (worktree.path / "secret.txt").write_bytes(secret)
    (worktree.path / "README.md").write_bytes(edited)

    scratch = tmp_path / "scratch"  # the bridge's data dir, which no agent sees
    taken = await snapshot(worktree, scratch)
    found = await diff(worktree, scratch)

    assert taken.tree
    assert taken.objects.is_relative_to(scratch)
    assert "+conversation A's secret" in found.patch
    assert not stored(repo, secret)
    assert not stored(repo, edited)
    assert stored(repo, b"hello\n"), "the test would prove nothing: cat-file finds nothing"


# --- 4. the index copy follows no link and has a size limit ---------------------------


async def test_an_index_linked_to_a_hidden_file_leaks_none_of_it(
    repo: Path, tmp_path: Path, outside: Path
) -> None:
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    (worktree.path / "new.txt").write_text("the agent's\n")
    index = admin_of(repo, worktree) / "index"
    index.unlink()
    index.symlink_to(outside / "store.sqlite3")

    found = await diff(worktree, tmp_path / "scratch")

    shown = found.stat + found.patch
    assert "+the agent's" in found.patch
    assert "SQLite" not in shown
    assert STORE_BYTES[:4].hex() not in shown  # git's "bad signature 0x…" names them
    assert untouched(outside)


@pytest.mark.usefixtures("small_files")
@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
async def test_an_index_linked_to_an_endless_file_is_not_copied(
    repo: Path, tmp_path: Path, target: str
) -> None:
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    (worktree.path / "new.txt").write_text("the agent's\n")
    index = admin_of(repo, worktree) / "index"
    index.unlink()
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")  # opened for reading without a writer, it blocks
        target = str(tmp_path / "fifo")
    index.symlink_to(target)
    started = time.monotonic()

    found = await diff(worktree, tmp_path / "scratch")

    assert time.monotonic() - started < 10
    assert "+the agent's" in found.patch


async def test_a_split_index_makes_no_snapshot_read_the_agents_admin_dir(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A split index names a `sharedindex.<hash>` that git looks for in its git dir
    # first: the admin dir, where the agent can leave a FIFO that blocks the reader.
    monkeypatch.setattr("bridge.projects.git.GIT_TIMEOUT", 10.0)
    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)
    (worktree.path / "new.txt").write_text("the agent's\n")
    agent_git(worktree.path, "update-index", "--split-index")
    shared = list(admin_of(repo, worktree).glob("sharedindex.*"))
    assert shared, "the test would prove nothing: git split no index"
    for path in shared:
        path.unlink()
        os.mkfifo(path)
    started = time.monotonic()

    found = await diff(worktree, tmp_path / "scratch")

    assert time.monotonic() - started < 5
    assert "+the agent's" in found.patch

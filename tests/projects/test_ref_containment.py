"""The bridge's own branch writes follow no link an agent planted among the shared refs.

Every agent of a project can write the repository's `refs` and `logs` (its commits
must land somewhere), so any of them can put a link where the bridge will create or
delete a conversation's branch: the folder `refs/heads/pi`, its twin under `logs`, or
the branch's own loose ref or reflog. git follows all of these (2.39, checked here:
`git branch` wrote the ref and reflog into a linked folder, `update-ref -d` removed
them there and, for a loose ref linked to `refs/heads/main`, deleted main). Each test
plants what an agent could and checks what happened outside: a folder standing for
the bridge's own files keeps exactly what it held, and the operator's branch stays.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from typing import TYPE_CHECKING

import pytest

from bridge.projects.git import WorktreeError
from bridge.projects.worktrees import (
    branch_name,
    delete_branch,
    ensure_worktree,
    remove_worktree,
    slug,
)
from tests.support.gitrepo import git, isolated_git, make_repo  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

KEY = "tg:-100:1"
NAME = slug(KEY)  # the last part of the branch, a file in refs/heads/pi and logs/…/pi
BRANCH = branch_name(KEY)
THE_BRIDGES = "the bridge's own file\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder of the bridge's, which no agent may reach."""
    where = tmp_path / "outside"
    where.mkdir()
    (where / "keep.txt").write_text(THE_BRIDGES)
    return where


def held(outside: Path) -> dict[str, bytes]:
    """What the folder holds, to compare before and after: nothing may be added,
    written or removed."""
    return {path.name: path.read_bytes() for path in outside.iterdir()}


def link_in(repo: Path, folder: str, target: Path) -> None:
    """As an agent does: `<common>/<folder>` becomes a link to `target`."""
    place = repo / ".git" / folder
    place.parent.mkdir(parents=True, exist_ok=True)
    if place.is_dir() and not place.is_symlink():
        shutil.rmtree(place)
    place.unlink(missing_ok=True)
    place.symlink_to(target)


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").split()


# --- creation ------------------------------------------------------------------------


async def test_creation_refuses_a_refs_folder_linked_out_of_the_repository(
    repo: Path, tmp_path: Path, outside: Path
) -> None:
    before = held(outside)
    link_in(repo, "refs/heads/pi", outside)

    with pytest.raises(WorktreeError, match="refs/heads/pi is a link"):
        await ensure_worktree(repo, tmp_path / "worktrees", KEY)

    assert held(outside) == before


@pytest.mark.parametrize(
    "planted", ["logs/refs/heads/pi", f"logs/refs/heads/pi/{NAME}"], ids=["folder", "reflog"]
)
async def test_creation_writes_no_reflog_through_a_link(
    repo: Path, tmp_path: Path, outside: Path, planted: str
) -> None:
    # git appends to an existing reflog even with core.logAllRefUpdates=false.
    before = held(outside)
    link_in(repo, planted, outside if planted.endswith("/pi") else outside / "keep.txt")

    worktree = await ensure_worktree(repo, tmp_path / "worktrees", KEY)

    assert held(outside) == before
    assert (worktree.path / "README.md").read_text() == "hello\n"
    assert f"refs/heads/{BRANCH}" in branches(repo)


# --- deletion ------------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["refs/heads/pi", "logs/refs/heads/pi"])
async def test_deletion_refuses_a_folder_linked_out_of_the_repository(
    repo: Path, outside: Path, planted: str
) -> None:
    git(repo, "branch", BRANCH)  # with its loose ref and reflog, as git makes them
    # A file of the bridge's that bears the branch's name (and reads as a ref: git
    # would not delete one it cannot read).
    (outside / NAME).write_text(git(repo, "rev-parse", "main"))
    before = held(outside)
    link_in(repo, planted, outside)

    with pytest.raises(WorktreeError, match=f"{planted} is a link"):
        await delete_branch(repo, BRANCH)

    assert held(outside) == before


async def test_deletion_removes_a_loose_ref_linked_out_as_the_link_only(
    repo: Path, outside: Path
) -> None:
    git(repo, "branch", BRANCH)
    before = held(outside)
    link_in(repo, f"refs/heads/{BRANCH}", outside / "keep.txt")

    await delete_branch(repo, BRANCH)

    assert held(outside) == before
    assert branches(repo) == ["refs/heads/main"]


async def test_deleting_the_branch_never_deletes_the_one_a_planted_link_names(
    repo: Path,
) -> None:
    # git reads a loose ref linked to "refs/…" as a symbolic ref, and `update-ref -d`
    # deletes what it points at.
    git(repo, "branch", BRANCH)
    (repo / ".git" / "refs" / "heads" / BRANCH).unlink()
    (repo / ".git" / "refs" / "heads" / BRANCH).symlink_to("refs/heads/main")

    await delete_branch(repo, BRANCH)

    assert branches(repo) == ["refs/heads/main"]
    assert git(repo, "log", "--format=%s", "main").strip() == "start"


async def test_a_packed_branch_is_deleted_and_the_other_packed_refs_are_kept(
    repo: Path,
) -> None:
    git(repo, "branch", BRANCH)
    git(repo, "tag", "-a", "-m", "annotated", "v1")  # a packed tag has a peeled line
    git(repo, "branch", "zzz")
    git(repo, "pack-refs", "--all")

    await delete_branch(repo, BRANCH)

    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    assert refs == ["refs/heads/main", "refs/heads/zzz", "refs/tags/v1"]
    assert git(repo, "rev-parse", "v1^{commit}") == git(repo, "rev-parse", "main")
    git(repo, "fsck", "--no-dangling")


async def test_a_repository_whose_refs_are_not_files_is_refused(repo: Path, tmp_path: Path) -> None:
    # git 2.45 and later keep refs in `reftable/`, where the bridge's files would not count.
    git(repo, "config", "extensions.refStorage", "reftable")

    with pytest.raises(WorktreeError, match=r"extensions\.refStorage"):
        await ensure_worktree(repo, tmp_path / "worktrees", KEY)

    assert branches(repo) == ["refs/heads/main"]


# --- a link that comes and goes --------------------------------------------------------


@contextlib.contextmanager
def flipping(repo: Path, outside: Path) -> Iterator[set[str]]:
    """As a hostile agent would: `refs/heads/pi` and `logs/refs/heads/pi` swapped for
    links to `outside` and back, over and over; yields what it saw appear there."""
    stop = threading.Event()
    seen: set[str] = set()
    folders = [repo / ".git" / "refs" / "heads" / "pi", repo / ".git" / "logs/refs/heads/pi"]

    def flip() -> None:
        while not stop.is_set():
            for folder in folders:
                held = folder.with_name("held")
                with contextlib.suppress(OSError):
                    folder.mkdir(parents=True, exist_ok=True)
                    folder.rename(held)
                    folder.symlink_to(outside)
                    os.sched_yield()
                    folder.unlink()
                    held.rename(folder)
            seen.update(name for name in os.listdir(outside) if name != "keep.txt")

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        yield seen
    finally:
        stop.set()
        flipper.join()


async def test_a_link_swapped_in_while_the_bridge_works_is_never_followed(
    repo: Path, tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "worktrees"
    before = held(outside)
    with flipping(repo, outside) as seen:
        for _ in range(30):
            with contextlib.suppress(WorktreeError):  # a refusal is fine; following is not
                worktree = await ensure_worktree(repo, root, KEY)
                await remove_worktree(repo, worktree, force=True, delete_branch=True)

    assert seen == set()
    assert held(outside) == before

"""Trees of a worktree as it is now: what /diff shows, and what a run changed.

A snapshot stages the whole worktree, untracked files included, in a throwaway index
and writes it as a tree; two snapshots name what changed between them. Its blobs and
trees go into an object dir of its own, under a scratch dir the caller keeps where
no agent can look (the bridge's data dir, which every sandbox hides), with the
repository's objects as an alternate to read from: one conversation's uncommitted
files never enter the shared object store, which every agent of the project reads.

The index is a copy of the worktree's own (its stat cache spares re-reading unchanged
files), taken from the admin dir the bridge named, never through a link the agent
planted there (`bridge.files.workspace_reads`); the agent's index itself is never touched. git
stages it with a git dir of the snapshot's own (`HEAD` and `commondir` only), never
the admin dir: a split index (`git update-index --split-index`) has git read
`sharedindex.<hash>` from its git dir, where the agent could leave a FIFO that holds
git until its timeout, or a link to a file of the bridge's. Not found there, it stops
git, and the snapshot starts from a fresh index.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio

from bridge.files.workspace_reads import copy_regular
from bridge.projects.git import WorktreeError
from bridge.projects.worktrees import Worktree, in_tree

# An index holds about 100 bytes per tracked file: 64 MiB is over half a million
# files. Past that it is not git's (an agent's link to /dev/zero), and is not copied.
MAX_INDEX_BYTES = 64 * 2**20
_COMPARE = (
    "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames",
    "--ignore-submodules=all",
)  # fmt: skip


@dataclass(frozen=True)
class Snapshot:
    """A tree of the worktree, and the private dir holding the objects only it has."""

    tree: str
    home: Path

    @property
    def objects(self) -> Path:
        return self.home / "objects"


@dataclass(frozen=True)
class Diff:
    """What a conversation changed against its base, committed or not.

    Named fields rather than the pair (stat, patch): the file count travels with them.
    """

    stat: str
    patch: str
    files: int


def _objects(worktree: Worktree, own: Path, *more: Path) -> dict[str, str]:
    """git's environment to write into `own` and read from the repository and `more`."""
    # C-quoted: git splits the list on ":", which a path may hold.
    alternates = (worktree.common / "objects", *more)
    quoted = [
        '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"' for path in alternates
    ]
    return {
        "GIT_OBJECT_DIRECTORY": str(own),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": ":".join(quoted),
    }


def objects_env(worktree: Worktree, own: Path) -> dict[str, str]:
    """git's environment to write new objects into `own`, reading the repository's."""
    return _objects(worktree, own)


async def snapshot(worktree: Worktree, scratch: Path) -> Snapshot:
    """The worktree as it is now, its new objects in a dir of its own under `scratch`;
    `drop` removes them."""
    await anyio.Path(scratch).mkdir(parents=True, exist_ok=True)
    home = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp("", "snap-", scratch)))
    try:
        await anyio.Path(home / "objects").mkdir()
        return Snapshot(await _write_tree(worktree, home), home)
    except BaseException:
        await drop(Snapshot("", home))
        raise


async def _write_tree(worktree: Worktree, home: Path) -> str:
    index = home / "index"
    # copy_regular keeps the index's mtime, by which git tells a file changed within
    # the same timestamp tick as the index was written ("racy git") from an unchanged one.
    copied = await anyio.to_thread.run_sync(
        copy_regular, worktree.admin / "index", index, MAX_INDEX_BYTES
    )
    git_dir = await _git_dir(worktree, home)
    env = {"GIT_INDEX_FILE": str(index), **_objects(worktree, home / "objects")}
    try:
        await in_tree(worktree, "add", "--all", env=env, git_dir=git_dir)
    except WorktreeError:
        if not copied:
            raise
        # An index git cannot read (the agent wrote junk over it, or split it): start
        # afresh, re-reading every file, rather than fail.
        await anyio.Path(index).unlink()
        await in_tree(worktree, "add", "--all", env=env, git_dir=git_dir)
    tree = (await in_tree(worktree, "write-tree", env=env, git_dir=git_dir)).strip()
    await anyio.Path(index).unlink()
    return tree


async def _git_dir(worktree: Worktree, home: Path) -> Path:
    """A git dir for staging, in the snapshot's own dir: what makes git take it for the
    worktree's (HEAD naming its branch, the common dir), and nothing of the agent's."""
    git_dir = home / "git"
    await anyio.Path(git_dir).mkdir()
    await anyio.Path(git_dir / "HEAD").write_text(f"ref: refs/heads/{worktree.branch}\n")
    await anyio.Path(git_dir / "commondir").write_text(f"{worktree.common}\n")
    return git_dir


async def drop(snapshot: Snapshot | None) -> None:
    """Remove a snapshot's objects (None: nothing to remove)."""
    if snapshot is not None:
        # The bridge's own dir, which no agent sees: nothing there can be a planted link.
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(snapshot.home, ignore_errors=True))


async def changed_between(worktree: Worktree, before: Snapshot, after: Snapshot) -> int:
    """How many files differ between two snapshots."""
    if before.tree == after.tree:
        return 0
    env = _objects(worktree, after.objects, before.objects)
    args = ("diff-tree", "-r", "--name-only", "-z", before.tree, after.tree)
    names = await in_tree(worktree, *args, env=env)
    return len([name for name in names.split("\0") if name])


async def diff(worktree: Worktree, scratch: Path) -> Diff:
    """Everything the conversation changed since it left its base, committed or not:
    the merge-base against a snapshot of the worktree (not the agent's own index,
    which `git add -N` would change for its `git commit`/`git stash`)."""
    merge_base = (await in_tree(worktree, "merge-base", worktree.base, "HEAD")).strip()
    taken = await snapshot(worktree, scratch)
    try:
        env = _objects(worktree, taken.objects)
        compare = ("diff", *_COMPARE)
        stat = await in_tree(worktree, *compare, "--stat", merge_base, taken.tree, env=env)
        patch = await in_tree(worktree, *compare, merge_base, taken.tree, env=env)
        names = await in_tree(
            worktree, *compare, "--name-only", "-z", merge_base, taken.tree, env=env
        )
    finally:
        await drop(taken)
    return Diff(stat, patch, len([name for name in names.split("\0") if name]))

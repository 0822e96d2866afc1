"""A worktree's two directories on disk, made, checked and removed by the bridge itself.

A linked worktree is its directory (`<root>/<slug>`, with a `.git` file naming its
admin dir) and its admin dir (`<common>/worktrees/<slug>`: `HEAD`, `commondir`,
`gitdir`, `index`). The bridge lays both out itself, as `git worktree add` would, and
removes both itself: git's `worktree add`, `list`, `repair`, `remove` and `prune` all
read every admin dir's `gitdir` whole, and each agent can write its own, linked to
/dev/zero (git then takes all the memory there is) or to a file of the bridge's that
`repair` would overwrite. Every file the agent can write is read through
`bridge.agentfiles`, which follows no link; the directories are named by the caller
from its own records, never from those files.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from bridge.agentfiles import read_regular, remove_tree
from bridge.gitrun import WorktreeError

MAX_LINK_FILE = 4096  # a `.git`, `gitdir` or `commondir` file holds one path (PATH_MAX)
LOCKED = "locked"  # while it is being made: `git worktree prune` leaves a locked one be


def lay_out(path: Path, admin: Path, common: Path, branch: str) -> None:
    """Make the admin dir and the directory of a worktree of `branch` (to be filled by
    `git read-tree -u`); `unlock` when it is filled. Neither may exist yet."""
    try:
        admin.parent.mkdir(exist_ok=True)
        admin.mkdir()
        write_new(admin / LOCKED, "initializing\n")
        write_new(admin / "commondir", os.path.relpath(common, admin) + "\n")
        write_new(admin / "HEAD", f"ref: refs/heads/{branch}\n")
        path.mkdir()
        write_new(path / ".git", f"gitdir: {admin}\n")
        write_new(admin / "gitdir", f"{path / '.git'}\n")
    except OSError as exc:
        raise WorktreeError(f"could not make the worktree {path}: {exc}") from exc


def unlock(admin: Path) -> None:
    (admin / LOCKED).unlink(missing_ok=True)


def write_new(path: Path, text: str) -> None:
    """Write a file that must not exist yet; a link there is not followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8") as file:
        file.write(text)


def pin_common(admin: Path, common: Path) -> None:
    """Put back a rewritten `<admin>/commondir`: git's ref store reads that file
    whatever GIT_COMMON_DIR says, and the agent can write its admin dir. Replaced,
    never written through (it may have become a link)."""
    marker = admin / "commondir"
    with contextlib.suppress(ValueError, OSError):  # undecodable, or a NUL in the path
        found = read_regular(marker, MAX_LINK_FILE)
        if found is not None and (admin / found.decode("utf-8").strip()).resolve() == common:
            return
    try:
        marker.unlink(missing_ok=True)
    except IsADirectoryError:
        remove_tree(marker)
    write_new(marker, os.path.relpath(common, admin) + "\n")  # what git writes: "../.."


def usable(path: Path, admin: Path) -> bool:
    """Whether the worktree and its admin dir are both there; clears the admin dir of a
    worktree whose directory was deleted by hand (git would still count its branch as
    checked out there)."""
    made, known = _is_dir(path), _is_dir(admin)
    if made and known:
        return True
    if made:
        raise WorktreeError(f"{path} has lost its git metadata; /project done removes it")
    if known:
        if not _admin_is_ours(path, admin):
            raise WorktreeError(f"{admin} is the git metadata of another worktree")
        _remove(admin)
    return False


def points_back(path: Path, admin: Path) -> bool:
    """Whether the worktree's `.git` is still the file naming its admin dir."""
    with contextlib.suppress(ValueError):  # undecodable
        found = read_regular(path / ".git", MAX_LINK_FILE)
        text = found.decode("utf-8").strip() if found is not None else ""
        named = text.removeprefix("gitdir: ")
        return named != text and Path(os.path.normpath(path / named)) == admin
    return False


def remove_both(path: Path, admin: Path) -> None:
    """Remove the worktree's directory, then its admin dir. In that order: were the
    bridge to stop in between, the admin dir left is tidied by the next `usable`,
    while a directory left without one would wait for /project done."""
    made = _remove(path)
    # With its directory there until now, `<slug>` is this worktree's: the bridge
    # made both under that one name.
    if made or _admin_is_ours(path, admin):
        _remove(admin)


def _is_dir(path: Path) -> bool:
    """Whether a directory is at `path`; a link or a file there is not what the bridge
    made, and is refused rather than followed."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(found.st_mode):
        raise WorktreeError(f"{path} is not the directory the bridge made; left as it is")
    return True


def _admin_is_ours(path: Path, admin: Path) -> bool:
    """Whether `<common>/worktrees/<slug>`, its directory gone, was this worktree's.

    Yes unless its `gitdir` names another worktree that exists: only this worktree's
    agent can write that file, while an operator's own worktree could bear the name.
    """
    with contextlib.suppress(ValueError):  # undecodable
        found = read_regular(admin / "gitdir", MAX_LINK_FILE)
        text = found.decode("utf-8").strip() if found is not None else ""
        claim = Path(os.path.normpath(admin / text))  # a relative one is from admin
        return not text or claim == path / ".git" or not os.path.lexists(claim)
    return True


def _remove(path: Path) -> bool:
    try:
        return remove_tree(path)
    except NotADirectoryError as exc:
        raise WorktreeError(f"{path} is not the directory the bridge made; left as it is") from exc
    except OSError as exc:
        raise WorktreeError(f"could not remove {path}: {exc.strerror or exc}") from exc

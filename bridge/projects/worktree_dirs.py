"""A worktree's two directories and its branch's ref on disk, made, checked and removed
by the bridge itself.

A linked worktree is its directory (`<root>/<slug>`, with a `.git` file naming its
admin dir) and its admin dir (`<common>/worktrees/<slug>`: `HEAD`, `commondir`,
`gitdir`, `index`). The bridge lays both out itself, as `git worktree add` would, and
removes both itself: git's `worktree add`, `list`, `repair`, `remove` and `prune` all
read every admin dir's `gitdir` whole, and each agent can write its own, linked to
/dev/zero (git then takes all the memory there is) or to a file of the bridge's that
`repair` would overwrite. Every file the agent can write is read through
`bridge.files.workspace_reads`, which follows no link; the directories are named by the caller
from its own records, never from those files.

The branch's ref is written and deleted here too, not by git: every agent of the
project can write the shared `refs` and `logs`, and git follows a link it finds there
(`git branch` writes the ref and its reflog where a linked `refs/heads/pi` points,
appends to a linked reflog even with `core.logAllRefUpdates=false`, and `update-ref
-d` removes them there, or deletes the branch a loose ref linked to `refs/…` names).
So each folder is opened name by name from the common dir following no link (a link
is refused, naming it), and the loose ref is written, the reflog removed and the
lock taken through that folder's descriptor, as git's files backend does by path:
`<name>.lock` made exclusively, then renamed over `<name>`. The bridge writes no
reflog of its own; `packed-refs` lives in the common dir, which no agent writes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.files.workspace_reads import open_folder, read_regular, remove_tree
from bridge.projects.git import LOCK_BACKOFF, LOCK_RETRIES, WorktreeError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

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


def create_ref(common: Path, branch: str, oid: str) -> None:
    """Make the loose ref `refs/heads/<branch>` name `oid`; anything already there (a
    link the agent left, say) is in the way, and refused."""
    folders = ["refs", "heads", *branch.split("/")]
    name = folders.pop()
    try:
        with _folder(common, folders, create=True) as fd, _locked(fd, name, common) as commit:
            if _present(fd, name):
                raise WorktreeError(f"{common}/refs/heads/{branch} is in the way")
            commit(f"{oid}\n".encode())
    except OSError as exc:  # say, an agent removed the folder meanwhile
        raise WorktreeError(f"could not write the branch {branch} in {common}: {exc}") from exc


def delete_ref(common: Path, branch: str) -> None:
    """Delete `refs/heads/<branch>`: its line in `packed-refs`, its loose ref (a link
    there is removed, not followed) and its reflog. Both folders are opened before
    anything changes: a link in either refuses the whole."""
    folders = ["heads", *branch.split("/")]
    name = folders.pop()
    try:
        with contextlib.ExitStack() as stack:
            refs = _existing(stack, common, ["refs", *folders])
            logs = _existing(stack, common, ["logs", "refs", *folders])
            if refs is not None:
                stack.enter_context(_locked(refs, name, common))
            _unpack(common, f"refs/heads/{branch}")
            for fd in (refs, logs):
                if fd is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=fd)
    except OSError as exc:
        raise WorktreeError(f"could not delete the branch {branch} in {common}: {exc}") from exc


def _existing(
    stack: contextlib.ExitStack[bool | None], common: Path, parts: list[str]
) -> int | None:
    """The folder's fd, closed with `stack`; None when it is not there (nor its ref)."""
    try:
        return stack.enter_context(_folder(common, parts, create=False))
    except FileNotFoundError:
        return None


def _unpack(common: Path, refname: str) -> None:
    """Drop `refname` from `packed-refs`, if it is there."""
    with _folder(common, [], create=False) as top, _locked(top, "packed-refs", common) as commit:
        try:
            packed = (common / "packed-refs").read_bytes()
        except FileNotFoundError:
            return
        kept = _without(packed, refname)
        if kept != packed:
            commit(kept)


def _without(packed: bytes, refname: str) -> bytes:
    """`packed-refs` without the line of `refname` and the peeled line ("^<oid>") that
    follows it when it names a tag. What stays keeps its order, so the header's
    traits ("sorted", "fully-peeled") still hold."""
    kept: list[bytes] = []
    dropping = False
    for line in packed.splitlines(keepends=True):
        if line.startswith(b"^") and dropping:
            continue
        dropping = line.rstrip(b"\n").partition(b" ")[2] == refname.encode()
        if not dropping:
            kept.append(line)
    return b"".join(kept)


@contextlib.contextmanager
def _folder(common: Path, parts: Sequence[str], *, create: bool) -> Iterator[int]:
    """The fd of `<common>/<parts>` (`agentfiles.open_folder`: FileNotFoundError when
    a part is missing and not `create`); a link on the way is refused, named."""
    try:
        fd = open_folder(common, parts, create=create)
    except NotADirectoryError as exc:
        raise WorktreeError(
            f"{common}/{exc.filename} {exc.strerror}: the bridge follows none among the "
            "shared refs and logs (an agent of this project may have made it); left as it is"
        ) from exc
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise WorktreeError(f"could not open {common}/{'/'.join(parts)}: {exc}") from exc
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(fd: int, name: str, common: Path) -> Iterator[Callable[[bytes], None]]:
    """git's lock on `name` in the folder `fd`: `<name>.lock`, made exclusively (a
    lock held elsewhere is waited for a little, as git's own are). The caller may
    `commit(data)`: it is written there and renamed over `name`; otherwise the lock
    is removed."""
    lock = _take_lock(fd, name, common)
    committed = False

    def commit(data: bytes) -> None:
        nonlocal committed
        view = memoryview(data)
        while view:
            view = view[os.write(lock, view) :]
        os.rename(f"{name}.lock", name, src_dir_fd=fd, dst_dir_fd=fd)
        committed = True

    try:
        yield commit
    finally:
        os.close(lock)
        if not committed:
            with contextlib.suppress(FileNotFoundError):  # whoever removed it, it is gone
                os.unlink(f"{name}.lock", dir_fd=fd)


def _take_lock(fd: int, name: str, common: Path) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for retry in range(1, LOCK_RETRIES + 1):
        with contextlib.suppress(FileExistsError):
            return os.open(f"{name}.lock", flags, 0o666, dir_fd=fd)
        time.sleep(LOCK_BACKOFF.delay(retry))  # in a worker thread, as every call here is
    try:
        return os.open(f"{name}.lock", flags, 0o666, dir_fd=fd)
    except FileExistsError as exc:
        raise WorktreeError(
            f"could not lock {name} in {common}: {name}.lock exists (another git at work, or "
            "one that stopped there: remove it if none runs)"
        ) from exc


def _present(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_ref(common: Path, branch: str) -> str | None:
    """The commit `refs/heads/<branch>` names, loose or packed; None when it is not
    there. A link in the way is refused, as everywhere here."""
    folders = ["refs", "heads", *branch.split("/")]
    name = folders.pop()
    try:
        with _folder(common, folders, create=False) as fd:
            try:
                ref = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                ref = -1
            if ref >= 0:
                with os.fdopen(ref, "rb") as file:
                    return _oid(file.read(100), f"refs/heads/{branch}")
    except FileNotFoundError:
        pass
    except OSError as exc:  # ELOOP: the ref itself is a link
        raise WorktreeError(f"could not read the branch {branch} in {common}: {exc}") from exc
    return _packed(common, f"refs/heads/{branch}")


def _packed(common: Path, refname: str) -> str | None:
    try:
        packed = (common / "packed-refs").read_bytes()  # the common dir: no agent writes it
    except FileNotFoundError:
        return None
    for line in packed.splitlines():
        oid, _, name = line.partition(b" ")
        if name == refname.encode():
            return _oid(oid, refname)
    return None


def _oid(data: bytes, refname: str) -> str:
    text = data.decode("ascii", "replace").strip()
    if len(text) not in (40, 64) or any(c not in "0123456789abcdef" for c in text):
        raise WorktreeError(f"{refname} does not name a commit")
    return text


def move_ref(common: Path, branch: str, old: str, new: str) -> None:
    """Move the loose ref `refs/heads/<branch>` from `old` to `new` (refused when it
    moved meanwhile), through its folder's descriptor, following no link."""
    folders = ["refs", "heads", *branch.split("/")]
    name = folders.pop()
    try:
        with _folder(common, folders, create=True) as fd, _locked(fd, name, common) as commit:
            if read_ref(common, branch) != old:
                raise WorktreeError(f"the branch {branch} moved meanwhile; nothing was committed")
            commit(f"{new}\n".encode())
    except OSError as exc:
        raise WorktreeError(f"could not move the branch {branch} in {common}: {exc}") from exc


def write_pack(common: Path, files: Sequence[tuple[str, bytes]]) -> None:
    """Put a pack (its `.pack`, then its `.idx`: git finds packs by their index) into
    the repository's `objects/pack`, through the folder's descriptor, following no
    link; a file already there (the same pack) is left as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with _folder(common, ["objects", "pack"], create=True) as fd:
            for name, data in files:
                try:
                    out = os.open(f"{name}.tmp", flags, 0o444, dir_fd=fd)
                except FileExistsError:
                    os.unlink(f"{name}.tmp", dir_fd=fd)
                    out = os.open(f"{name}.tmp", flags, 0o444, dir_fd=fd)
                with os.fdopen(out, "wb") as file:
                    file.write(data)
                if not _present(fd, name):
                    os.rename(f"{name}.tmp", name, src_dir_fd=fd, dst_dir_fd=fd)
                else:
                    os.unlink(f"{name}.tmp", dir_fd=fd)
    except OSError as exc:
        raise WorktreeError(f"could not store the commit in {common}: {exc}") from exc

"""Files and directories an agent can write, as the bridge reads, copies and removes them.

Where the bridge expects a file it or git made (a worktree's `.git` file, its admin
dir's `index`, `commondir` or `gitdir`), a hostile agent can leave a link to one of
the bridge's own files, a FIFO that blocks its reader, or a link to an endless device.
So a file is opened with O_NOFOLLOW | O_NONBLOCK, must then be a regular file with a
single name, and is read from that descriptor and never past a limit; a directory is
removed without following a link inside it, and one below a directory of the
bridge's is reached one name at a time, none of them a link (`open_folder`), so that
what is done there through its descriptor stays there however the names change
meanwhile. Each refusal of a file is a value (None, False), for the caller to fall
back on; `remove_tree` and `open_folder` raise, as nothing can stand in for them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

CHUNK = 2**20
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_regular(path: Path, limit: int) -> tuple[int, os.stat_result] | None:
    """An fd of `path` when it is a regular file of at most `limit` bytes.

    One name only: a hard link could name a file from elsewhere (git never makes one).
    """
    try:
        fd = os.open(path, _OPEN)
    except OSError:  # ELOOP: a link; ENOENT: nothing; ENXIO: a socket
        return None
    found = os.fstat(fd)  # a FIFO opens at once (O_NONBLOCK) and is refused here
    if stat.S_ISREG(found.st_mode) and found.st_nlink == 1 and found.st_size <= limit:
        return fd, found
    os.close(fd)
    return None


def read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of `path`, or None when it is not a regular file of at most `limit`."""
    opened = _open_regular(path, limit)
    if opened is None:
        return None
    with os.fdopen(opened[0], "rb") as file:
        data = file.read(limit + 1)
    return data if len(data) <= limit else None  # it grew while being read


def copy_regular(source: Path, target: Path, limit: int) -> bool:
    """Copy `source` to the new file `target` with its times, as shutil.copy2 does;
    False (and no `target`) when `source` is not a regular file of at most `limit`."""
    opened = _open_regular(source, limit)
    if opened is None:
        return False
    fd, found = opened
    copied = 0
    with os.fdopen(fd, "rb") as file, open(target, "xb") as out:
        while chunk := file.read(CHUNK):
            copied += len(chunk)
            if copied > limit:  # it grew while being copied
                break
            out.write(chunk)
    if copied > limit:
        target.unlink()
        return False
    os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns))
    return True


def remove_tree(path: Path) -> bool:
    """Remove the directory `path` and everything in it, following no link; False when
    nothing is there. A link or a file at `path` itself is refused (NotADirectoryError).

    shutil.rmtree works through directory fds on Linux (`avoids_symlink_attacks`): a
    link inside is removed as a link, never followed.
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(found.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(path))
    _unseal(path, found)
    shutil.rmtree(path)
    return True


def _unseal(top: Path, found: os.stat_result) -> None:
    """Give the owner back rwx on every directory under `top`: an agent may have taken
    its own away (`chmod 0 dir`), and rmtree cannot empty what it cannot list.

    Only names that lstat shows to be directories are changed. chmod follows links
    (Linux has no lchmod), so this holds while nothing swaps a directory for a link
    meanwhile: the caller has stopped the agent that could.
    """
    owner = stat.S_IRWXU
    if found.st_mode & owner != owner:
        os.chmod(top, stat.S_IMODE(found.st_mode) | owner)
    for _, dirnames, _, dirfd in os.fwalk(top, follow_symlinks=False):
        for name in dirnames:
            with contextlib.suppress(OSError):  # rmtree names what is really in the way
                inner = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if stat.S_ISDIR(inner.st_mode) and inner.st_mode & owner != owner:
                    os.chmod(name, stat.S_IMODE(inner.st_mode) | owner, dir_fd=dirfd)


def open_folder(top: Path, parts: Sequence[str], *, create: bool = False) -> int:
    """An fd of the directory `top/<parts>`, opened one part at a time from `top` (the
    bridge's own) without following a link; the caller closes it. A missing part
    raises FileNotFoundError unless `create` makes it; a part that is a link or no
    directory raises NotADirectoryError, its filename the parts up to it
    ("refs/heads/pi").

    Each part is opened relative to the fd of the one before, so a link swapped in
    for a part already opened changes nothing: the fd is of the directory itself.
    """
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, part in enumerate(parts):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                inner = os.open(part, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:  # ENOTDIR, or ELOOP for a link on some systems
                named = "/".join(parts[: depth + 1])
                raise NotADirectoryError(errno.ENOTDIR, _what(fd, part), named) from exc
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _what(fd: int, name: str) -> str:
    try:
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return "is not a directory"
    return "is a link" if stat.S_ISLNK(found.st_mode) else "is not a directory"

"""What the bridge posts from files an agent can write, read with the bridge's own rules.

/get, /export, the agent's `send_file` and the diff previews all post through here:
only a regular file inside the roots it is asked for once links and `..` are resolved,
within a size cap, and none the agent's sandbox hides (`bridge.containment.hidden.Sight`:
the store, other conversations' files, in every sandbox mode). The file is opened
without following a last link and without waiting on a FIFO, since the agent may swap
it meanwhile.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.containment.hidden import Sight

# Read into memory and posted whole: under Telegram's 50 MB for bots.
MAX_POSTED_BYTES = 20 * 2**20


class ExportRefused(Exception):
    """A path names nothing the bridge may post; says why."""


def read_inside(
    path: Path,
    roots: Sequence[Path],
    cap: int,
    *,
    sight: Sight,
    outside: str,
    hidden: str,
    what: str,
) -> tuple[Path, bytes]:
    """The contents of `path` (relative names taken from the agent's cwd) if it is a
    regular file of at most `cap` bytes inside one of `roots` once links and `..` are
    resolved, and one the agent's `sight` shows; the bridge's own files
    (`/proc/self/environ`, its config, its store) never are. `ExportRefused` says
    `outside`, `hidden`, or that `what` is too large."""
    try:
        real = path.resolve(strict=True)
        refuse(real, roots, sight, outside, hidden)
        # No link at the end, and no wait on a FIFO: the agent may swap the file meanwhile.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a link loop
        raise ExportRefused(outside) from exc
    data = b""
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ExportRefused(outside)
        refuse(_opened(fd, real), roots, sight, outside, hidden)
        if status.st_size <= cap:
            with os.fdopen(fd, "rb", closefd=False) as file:
                data = file.read(cap + 1)  # one still growing is cut off here, not read on
    finally:
        os.close(fd)
    if status.st_size > cap or len(data) > cap:
        raise ExportRefused(f"{what} is larger than {cap / 2**20:g} MB; not sent.")
    return real, data


def refuse(real: Path, roots: Sequence[Path], sight: Sight, outside: str, hidden: str) -> None:
    """`ExportRefused` for the resolved `real` outside every one of `roots` (saying
    `outside`), or hidden from the agent (saying `hidden`)."""
    if not any(real.is_relative_to(root) for root in roots):
        raise ExportRefused(outside)
    if not sight.shows(real):
        raise ExportRefused(hidden)


def _opened(fd: int, fallback: Path) -> Path:
    """What `fd` really is: a folder on the way may have become a link after `resolve`."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:  # no /proc (not Linux): the resolved path is the best we know
        return fallback


async def workspace_file(
    cwd: Path, name: str, sight: Sight, *, outside: str, hidden: str, missing: str | None = None
) -> tuple[Path, bytes]:
    """The file `name` names in the workspace `cwd` (its path relative to the
    workspace, its bytes), for /get and the agent's `send_file`. `ExportRefused` says
    `outside` for an absolute name, one whose `..` lead out (decided on the spelling,
    so nothing outside is even looked at) or a link out, `hidden` for one the agent's
    `sight` does not show (decided before whether it exists, so nothing is told of
    what lies under a cover), `missing` for no such file when given, or that it is
    over `MAX_POSTED_BYTES`."""
    workspace = Path(await anyio.Path(cwd).resolve())
    if PurePosixPath(name).is_absolute() or not _within(workspace, name):
        raise ExportRefused(outside)
    try:
        real = Path(await anyio.Path(workspace / name).resolve())
    except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop (Python < 3.13)
        raise ExportRefused(outside) from exc
    refuse(real, (workspace,), sight, outside, hidden)
    if missing is not None and not await anyio.Path(workspace / name).is_file():
        raise ExportRefused(missing)
    path, content = await anyio.to_thread.run_sync(
        lambda: read_inside(
            workspace / name,
            (workspace,),
            MAX_POSTED_BYTES,
            sight=sight,
            outside=outside,
            hidden=hidden,
            what=name,
        )
    )
    return path.relative_to(workspace), content


def _within(workspace: Path, name: str) -> bool:
    """Whether `name` stays inside `workspace` by its spelling (`..` taken away)."""
    return Path(os.path.normpath(workspace / name)).is_relative_to(workspace)

"""/export: the session as an HTML file, posted into the chat.

The agent writes the export where the bridge asks (its session dir), but its
answer names the file, and the bridge reads it with its own rights: only a
regular file inside the conversation's session dir or workspace, within
`MAX_EXPORT_BYTES`, and none its agent's sandbox hides (`bridge.hidden.Sight`: the
store, other conversations' files, in every sandbox mode) is ever posted
(`read_inside`, which /get, `send_file` and the diff previews use too).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.controls.common import data
from bridge.model import Upload
from bridge.rpc.commands import ExportHtml

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.controls.target import Target
    from bridge.hidden import Sight
    from bridge.model import Op

# Read into memory and posted whole; under Telegram's 50 MB for bots, and a session's
# HTML export is a few MB even for long sessions.
MAX_EXPORT_BYTES = 20 * 2**20
NOT_IN_SESSION = "The agent's export is not a file in this conversation's session; not sent."
HIDDEN = (
    "The agent's export names a file hidden from it (the bridge's data, other "
    "conversations' files); not sent."
)


async def export(target: Target, arg: str) -> list[Op]:
    """The agent writes the export where the bridge asks (its session dir; pi's own
    default is a relative name in its cwd), but its answer names the file: only a
    regular file inside this conversation's session dir or workspace, and not hidden
    from the agent, is posted."""
    agent = await target.ensure_agent()
    record = target.record
    assert record is not None
    session_dir = Path(await anyio.Path(record.session_dir).resolve())
    cwd = Path(await anyio.Path(agent.spec.cwd).resolve())
    stem = Path(record.session_file).stem if record.session_file else "session"
    asked = session_dir / f"pi-session-{stem}.html"
    response = await agent.request(ExportHtml(outputPath=str(asked)))
    answer = str(data(response.data).get("path") or "")
    try:
        sight = await anyio.to_thread.run_sync(target.projects.sight, cwd)
        path, content = await anyio.to_thread.run_sync(
            lambda: read_inside(cwd / answer, (session_dir, cwd), MAX_EXPORT_BYTES, sight=sight)
        )
    except ExportRefused as refused:
        return target.renderer.notice(f"⚠️ {refused}")
    upload = Upload(
        slot=f"export:{target.new_token()}",
        filename=path.name,
        data=content,
        caption="Session export",
    )
    return [upload]


class ExportRefused(Exception):
    """A path names nothing the bridge may post; says why."""


def read_inside(
    path: Path,
    roots: Sequence[Path],
    cap: int,
    *,
    sight: Sight,
    outside: str = NOT_IN_SESSION,
    hidden: str = HIDDEN,
    what: str = "The agent's export",
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

"""/get <path>: a file of the conversation's workspace, posted into the chat.

Only a regular file inside the workspace (the live agent's cwd) once links and `..`
are resolved, within `MAX_POSTED_BYTES`, is posted (`export.read_inside`); an absolute
path is refused outright, so `/get /etc/passwd`, `/get ../../etc/passwd` and a link
out of the workspace all get the same answer and nothing is read. Nor is anything the
agent's sandbox hides (`bridge.hidden.Sight`), in every sandbox mode: a workspace that
holds the data dir, or another conversation's workspace, never hands those out.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import anyio

from bridge.controls.export import ExportRefused, read_inside, refuse
from bridge.model import Upload

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.hidden import Sight
    from bridge.model import Op

# Read into memory and posted whole, as /export: under Telegram's 50 MB for bots.
MAX_POSTED_BYTES = 20 * 2**20
USAGE = "Usage: /get <path>, a file in this conversation's workspace (e.g. /get inbox/build.log)."
OUTSIDE = "⚠️ /get sends only files inside this conversation's workspace; not sent."
HIDDEN = (
    "⚠️ /get sends no file hidden from this conversation's agent (the bridge's data, "
    "other conversations' files); not sent."
)


async def get(target: Target, arg: str) -> list[Op]:
    """Post the workspace file `arg` names (relative to the workspace)."""
    name = arg.strip()
    if not name:
        return target.renderer.notice(USAGE)
    if name.startswith("~"):
        return target.renderer.notice(OUTSIDE)
    agent = await target.ensure_agent()
    missing = f"⚠️ No file {name} in this conversation's workspace."
    sight = await anyio.to_thread.run_sync(target.projects.sight, agent.spec.cwd)
    try:
        path, content = await workspace_file(
            agent.spec.cwd, name, sight, outside=OUTSIDE, hidden=HIDDEN, missing=missing
        )
    except ExportRefused as refused:
        return target.renderer.notice(str(refused))
    return [Upload(f"get:{target.new_token()}", path.name, content, caption=path.as_posix())]


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

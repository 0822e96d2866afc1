"""/get <path>: a file of the conversation's workspace, posted into the chat.

Only a regular file inside the workspace (the live agent's cwd) once links and `..`
are resolved, within `MAX_POSTED_BYTES`, is posted (`bridge.files.posting`); an absolute
path is refused outright, so `/get /etc/passwd`, `/get ../../etc/passwd` and a link
out of the workspace all get the same answer and nothing is read. Nor is anything the
agent's sandbox hides (`bridge.containment.hidden.Sight`), in every sandbox mode: a workspace that
holds the data dir, or another conversation's workspace, never hands those out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from bridge.files.posting import ExportRefused, workspace_file
from bridge.model import Upload

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op

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

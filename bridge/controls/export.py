"""/export: the session as an HTML file, posted into the chat.

The agent writes the export where the bridge asks (its session dir), but its
answer names the file, and the bridge reads it with its own rights: only a
regular file inside the conversation's session dir or workspace, within
`MAX_EXPORT_BYTES`, and none its agent's sandbox hides (`bridge.containment.hidden.Sight`: the
store, other conversations' files, in every sandbox mode) is ever posted
(`bridge.files.posting.read_inside`, which /get, `send_file` and the diff previews use too).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.controls.common import data
from bridge.files.posting import ExportRefused, read_inside
from bridge.model import Upload
from bridge.rpc.commands import ExportHtml

if TYPE_CHECKING:
    from bridge.controls.target import Target
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
            lambda: read_inside(
                cwd / answer,
                (session_dir, cwd),
                MAX_EXPORT_BYTES,
                sight=sight,
                outside=NOT_IN_SESSION,
                hidden=HIDDEN,
                what="The agent's export",
            )
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

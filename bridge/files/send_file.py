"""Files the agent sends to the chat: its `send_file` tool (bridge/extensions/send-file.ts).

The tool's start carries the path (by `toolCallId`); when the call ends without error
the bridge reads the file itself, with its own rules (`bridge.files.posting.workspace_file`,
as for /get: a regular file inside the agent's working directory once links and `..`
are resolved, within `MAX_POSTED_BYTES`, and none its sandbox hides, in every sandbox
mode: `bridge.containment.hidden.Sight`), and posts it. The extension's own check is a courtesy
to the agent; this one is the rule. A call that ends in error sends nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from bridge.files.posting import ExportRefused, workspace_file
from bridge.model import Upload
from bridge.rpc.events import ToolExecutionEnd, ToolExecutionStart

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bridge.containment.hidden import Sight
    from bridge.model import Op
    from bridge.rpc.agent_event import AgentEvent

OUTSIDE = "⚠️ The agent asked to send a file outside its workspace; not sent."
HIDDEN = (
    "⚠️ The agent asked to send a file hidden from it (the bridge's data, other "
    "conversations' files); not sent."
)
KEPT = 64  # calls remembered between start and end (a run has a few at once)


class SentFiles:
    """The agent's `send_file` calls between their start and end."""

    def __init__(self, sight: Callable[[Path], Sight]) -> None:
        self._sight = sight  # what the agent working in a folder sees (Projects.sight)
        self._asked: dict[str, tuple[str, str]] = {}  # toolCallId → (path, caption)

    async def seen(self, event: AgentEvent, cwd: Path) -> list[Op] | str:
        """The upload a finished call makes, a refusal to tell, or nothing ([])."""
        match event:
            case ToolExecutionStart(toolName="send_file", args=dict() as args):
                path, caption = args.get("path"), args.get("caption")
                if isinstance(path, str) and len(self._asked) < KEPT:
                    self._asked[event.toolCallId] = (
                        path,
                        caption if isinstance(caption, str) else "",
                    )
            case ToolExecutionEnd(toolName="send_file"):
                asked = self._asked.pop(event.toolCallId, None)
                if asked is not None and not event.isError:
                    return await self._upload(cwd, *asked, event.toolCallId)
        return []

    async def _upload(self, cwd: Path, name: str, caption: str, call: str) -> list[Op] | str:
        sight = await anyio.to_thread.run_sync(self._sight, cwd)
        try:
            path, content = await workspace_file(cwd, name, sight, outside=OUTSIDE, hidden=HIDDEN)
        except ExportRefused as refused:
            return str(refused)
        # Named after the call: a replay after a restart knows the file went out (hosting.py).
        return [Upload(f"sent:{call}", path.name, content, caption=caption or path.as_posix())]

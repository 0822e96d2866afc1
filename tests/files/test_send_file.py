"""The bridge's own rule for files the agent sends (`bridge/files/send_file.py`): whatever the
extension let through, only a regular file inside the workspace and not hidden from the
agent is posted, after a call that ended without error, once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.containment.hidden import Sight
from bridge.files.send_file import HIDDEN, OUTSIDE, SentFiles
from bridge.model import Upload
from bridge.rpc.events import ToolExecutionEnd, ToolExecutionStart

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


def start(path: object, call: str = "c1", caption: str | None = None) -> ToolExecutionStart:
    args: dict[str, object] = {"path": path}
    if caption is not None:
        args["caption"] = caption
    return ToolExecutionStart(
        type="tool_execution_start", toolCallId=call, toolName="send_file", args=args
    )


def end(call: str = "c1", *, error: bool = False) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        type="tool_execution_end", toolCallId=call, toolName="send_file", isError=error
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "out").mkdir(parents=True)
    (root / "out" / "report.txt").write_bytes(b"REPORT")
    (tmp_path / "secret.txt").write_bytes(b"SECRET")
    (root / "leak").symlink_to(tmp_path / "secret.txt")
    (root / "dir").mkdir()
    (root / "data").mkdir()  # as if the data dir lay in the workspace
    (root / "data" / "store").write_bytes(b"STORE")
    return root


def sight(cwd: Path) -> Sight:
    """What the agent working in `cwd` sees: all of it but its `data/`."""
    return Sight(hidden=((cwd / "data").resolve(),), own=(cwd.resolve(),))


async def test_a_finished_call_posts_the_file_once_with_its_caption(workspace: Path) -> None:
    sent = SentFiles(sight)
    assert await sent.seen(start("out/report.txt", caption="Here."), workspace) == []
    assert await sent.seen(end(), workspace) == [
        Upload("sent:c1", "report.txt", b"REPORT", caption="Here.")  # named after the call
    ]
    assert await sent.seen(end(), workspace) == []  # ended once: nothing more


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "leak", "dir", "/etc/hostname", "missing.txt"],
    ids=["dot-dot", "link out", "a folder", "absolute", "missing"],
)
async def test_nothing_outside_the_workspace_or_not_a_file_is_posted(
    workspace: Path, path: str
) -> None:
    sent = SentFiles(sight)
    await sent.seen(start(path), workspace)
    told = await sent.seen(end(), workspace)
    assert told == OUTSIDE


async def test_a_call_that_failed_or_another_tool_posts_nothing(workspace: Path) -> None:
    sent = SentFiles(sight)
    await sent.seen(start("out/report.txt"), workspace)
    assert await sent.seen(end(error=True), workspace) == []
    other = ToolExecutionEnd(type="tool_execution_end", toolCallId="c2", toolName="read")
    assert await sent.seen(other, workspace) == []


async def test_a_file_hidden_from_the_agent_is_not_posted_even_through_a_link(
    workspace: Path,
) -> None:
    (workspace / "store-link").symlink_to(workspace / "data" / "store")
    for path in ("data/store", "store-link"):
        sent = SentFiles(sight)
        await sent.seen(start(path), workspace)
        assert await sent.seen(end(), workspace) == HIDDEN

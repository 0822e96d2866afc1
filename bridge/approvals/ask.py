"""The approval gate's question, as the agent asks it.

bridge/extensions/approval-gate.ts asks through an ordinary `select` dialog whose title
is `PREFIX` plus one line of JSON: `{v: 1, toolCallId, tool, cwd, input, truncated}`.
`parse` turns such a title back into an `ApprovalAsk` and answers None for any other
title, so the bridge can tell its own questions from other extensions' dialogs. The
answers the gate understands are `OPTIONS` (plus "deny:<why>", which blocks with the
reason given).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

PREFIX = "pi-bridge:approval "
OPTIONS = ("allow", "always", "deny", "reason")
VERSION = 1
FILE_TOOLS = frozenset({"edit", "write"})

# pi turns these into plain spaces before it resolves a tool's path (path-utils.js).
_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")


@dataclass(frozen=True)
class ApprovalAsk:
    """One tool call waiting for a yes or no."""

    tool: str
    tool_call_id: str
    cwd: str  # the agent's working directory when it asked
    input: Mapping[str, object]  # the tool's arguments, as the tool will get them
    truncated: bool  # long strings of `input` were cut to keep the title small

    @property
    def command(self) -> str:
        """The command of a `bash` call; "" for any other tool."""
        value = self.input.get("command") if self.tool == "bash" else None
        return value if isinstance(value, str) else ""

    @property
    def path(self) -> str:
        """The file an `edit` or `write` changes, absolute and normalised; "" otherwise.

        Resolved the way pi resolves it (a leading "@" dropped, file:// URLs read as
        paths). A `~` path stays `~/…`: the agent's home is not known here.
        """
        if self.tool not in FILE_TOOLS:
            return ""
        raw = self.input.get("path", self.input.get("file_path"))
        return resolve(self.cwd, raw) if isinstance(raw, str) else ""


def resolve(cwd: str, raw: str) -> str:
    """`raw` as pi's tools read it, made absolute against `cwd`; "" when empty."""
    path = _UNICODE_SPACES.sub(" ", raw)
    path = path.removeprefix("@")
    if path.startswith("file://"):
        path = unquote(urlsplit(path).path)
    if not path:
        return ""
    if path == "~" or path.startswith("~/"):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(cwd, path))


def parse(title: str) -> ApprovalAsk | None:
    """The question in a dialog title, or None when it is not one (never raises)."""
    if not isinstance(title, str) or not title.startswith(PREFIX):
        return None
    try:
        payload = json.loads(title[len(PREFIX) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    version = payload.get("v")
    # `type(...) is int`: JSON true would pass an `== 1` test.
    if type(version) is not int or version != VERSION:
        return None
    tool = payload.get("tool")
    call_id = payload.get("toolCallId")
    cwd = payload.get("cwd")
    arguments = payload.get("input", {})
    truncated = payload.get("truncated", False)
    if not (isinstance(tool, str) and tool and isinstance(call_id, str) and call_id):
        return None
    if not (isinstance(cwd, str) and isinstance(arguments, dict)):
        return None
    if not isinstance(truncated, bool):
        return None
    return ApprovalAsk(
        tool=tool, tool_call_id=call_id, cwd=cwd, input=arguments, truncated=truncated
    )

"""The "Always allow" answers: what one covers, and whether a later call is covered.

A grant names one bash command (its words, whitespace collapsed) or one file (the
absolute path an edit or write changes). Matching is exact on purpose: a grant for
`rm -rf build` must never let `rm -rf build /` through, so there is no prefix or
pattern matching here.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from bridge.store.records import Grant

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.approvals.ask import ApprovalAsk


def normalise_command(command: str) -> str:
    """The command with runs of whitespace collapsed to one space, ends stripped."""
    return " ".join(command.split())


def _key(ask: ApprovalAsk) -> tuple[str, str] | None:
    if ask.tool == "bash":
        command = normalise_command(ask.command)
        return ("command", command) if command else None
    if ask.tool in ("edit", "write"):
        return ("file", ask.path) if ask.path else None
    return None


def grant_for(ask: ApprovalAsk, by: str, at: float) -> Grant | None:
    """The grant an "always" answer to `ask` makes; None for tools that get none."""
    key = _key(ask)
    if key is None:
        return None
    kind, value = key
    return Grant(kind="command" if kind == "command" else "file", value=value, by=by, at=at)


def granted(ask: ApprovalAsk, grants: Sequence[Grant]) -> Grant | None:
    """The first grant that covers `ask` exactly, or None."""
    key = _key(ask)
    if key is None:
        return None
    return next((g for g in grants if (g.kind, g.value) == key), None)


def describe(grant: Grant, workspace: str | None = None) -> str:
    """One line for a list of grants: `` `npm test` `` or `✏️ src/app.py`.

    A file inside `workspace` (when given) is shown relative to it.
    """
    if grant.kind == "file":
        path = grant.value
        if workspace:
            root = posixpath.normpath(workspace)
            if path.startswith(root.rstrip("/") + "/"):
                path = posixpath.relpath(path, root)
        return f"✏️ {path}"
    # A command holding a backtick needs a longer fence to stay one code span.
    fence = "``" if "`" in grant.value else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{grant.value}{pad}{fence}"

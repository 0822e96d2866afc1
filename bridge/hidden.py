"""What one conversation's agent cannot see: one answer for its sandbox and the bridge's reads.

`hidden_paths` lists what the agent's sandbox covers (`bridge.sandbox.contain`): the
data dir, the operator's `[sandbox] hidden` paths (the configuration file, a sqlite
store kept outside the data dir) and other conversations' configured workspaces. The
sandbox then binds the conversation's own folders back on top of those covers, a deeper
mount over a shallower one (`bridge/rpc/sandbox.py`).

`Sight` is the same view for the files the bridge reads with its own rights on the
agent's or a person's behalf (/get, /export, `send_file`, diff previews), in every
sandbox mode: a path is seen when the deepest own folder holding it lies at least as
deep as the deepest hidden path holding it. Paths are compared resolved, never read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from bridge.options import BridgeOptions


def hidden_paths(options: BridgeOptions, key: str, workspace: Path) -> tuple[Path, ...]:
    """What the agent of conversation `key`, working in `workspace`, must not see:
    resolved, each once, whether or not it exists yet."""
    extra = options.agent.sandbox.hidden
    return _resolved((options.data_dir, *extra, *_others(options, key, workspace)))


@dataclass(frozen=True)
class Sight:
    """What one conversation's agent sees of the files: all but `hidden`, except that
    its `own` folders (workspace, session dir, home, … as the sandbox binds them back)
    are seen even inside a hidden one. All paths resolved."""

    hidden: tuple[Path, ...]
    own: tuple[Path, ...]

    def shows(self, path: Path) -> bool:
        """Whether the agent sees `path`, given resolved (no links, no `..`)."""
        return _depth(path, self.own) >= _depth(path, self.hidden)


def _depth(path: Path, roots: Iterable[Path]) -> int:
    """How deep the deepest of `roots` that holds `path` lies; -1 when none does."""
    return max((len(root.parts) for root in roots if path.is_relative_to(root)), default=-1)


def _resolved(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(p.resolve() for p in paths))


def _others(options: BridgeOptions, key: str, workspace: Path) -> list[Path]:
    """Other conversations' configured workspaces, unless ours lies inside one."""
    mine = workspace.resolve()
    own = options.chat(key)
    found = []
    for chat in options.chats.values():
        if chat is own or chat.workspace is None:
            continue
        other = chat.workspace.resolve()
        if not mine.is_relative_to(other):
            found.append(other)
    return found

"""What one conversation's agent cannot see: one answer for its sandbox and the bridge's reads.

`hidden_paths` lists what the agent's sandbox covers (`bridge.containment.sandbox.contain`): the
data dir, the operator's `[sandbox] hidden` paths (the configuration file, a sqlite
store kept outside the data dir), other conversations' configured workspaces, and the
system's runtime dirs (`/run`: the system's unix sockets, which a read-only mount does
not keep a `connect()` from). The sandbox then binds the conversation's own folders
back on top of those covers, a deeper mount over a shallower one
(`bridge/rpc/sandbox.py`), and `bound_back` names what of the system's must be seen
inside a cover (the resolver's file, where systemd-resolved keeps it under `/run`).

`Sight` is the same view for the files the bridge reads with its own rights on the
agent's or a person's behalf (/get, /export, `send_file`, diff previews), in every
sandbox mode: a path is seen when the deepest own folder holding it lies at least as
deep as the deepest hidden path holding it. Paths are compared resolved, never read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from bridge.options import BridgeOptions

RUNTIME_DIRS = (Path("/run"), Path("/var/run"))  # where the system keeps its sockets
RESOLVER = Path("/etc/resolv.conf")


def hidden_paths(options: BridgeOptions, key: str, workspace: Path) -> tuple[Path, ...]:
    """What the agent of conversation `key`, working in `workspace`, must not see:
    resolved, each once, whether or not it exists yet."""
    extra = (*options.agent.sandbox.hidden, *_others(options, key, workspace))
    return _resolved((options.data_dir, *extra, *runtime_dirs()))


def runtime_dirs() -> tuple[Path, ...]:
    """/run, and /var/run where it is a directory of its own rather than a link to it."""
    return tuple(p for p in RUNTIME_DIRS if p.is_dir() and not p.is_symlink())


def bound_back() -> tuple[Path, ...]:
    """What of the system lies under a runtime dir and must still be seen: the resolver's
    file when /etc/resolv.conf points there (systemd-resolved), so names resolve."""
    resolver = RESOLVER.resolve()
    inside = any(resolver.is_relative_to(p) for p in runtime_dirs())
    return (resolver,) if inside and resolver.is_file() else ()


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

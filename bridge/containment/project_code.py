"""What pi would load as code from an agent's own workspace, masked in its sandbox.

At start pi loads extensions from `<cwd>/.pi/extensions`, from the packages it installs
under `<cwd>/.pi/npm` and `<cwd>/.pi/git`, and from whatever `<cwd>/.pi/settings.json`
names (pi 0.73 does so with no question asked; later versions ask whether the project is
trusted). The agent writes its cwd, so an extension planted there would run inside pi
at its next start, on the far side of every wall the sandbox puts between pi and its
tools: its code could answer pi's own approval questions. So each of those paths that
exists when the agent starts is covered, read-only, with an empty directory or an empty
settings object; the atomic fork's `.atomic` likewise. The person's files stay as they
are on disk; only pi does not see them.

A link is followed: what it points to is covered, wherever that is, and the covers are
mounted after everything else (`bridge/rpc/sandbox.py`), so a link into a writable
place cannot lift them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bridge.rpc.sandbox import Bind

if TYPE_CHECKING:
    from pathlib import Path

CONFIG_DIRS = (".pi", ".atomic")  # pi's project config dir, and the atomic fork's
CODE_DIRS = ("extensions", "npm", "git")  # loaded or installed as code at start
SETTINGS = "settings.json"  # may name extensions and packages anywhere


def masks(cwd: Path, data_dir: Path) -> tuple[Bind, ...]:
    """The read-only covers for pi's project code under `cwd`, from blanks the bridge
    keeps in its data dir (which no agent can write)."""
    found: list[Bind] = []
    for config in CONFIG_DIRS:
        for name in (*CODE_DIRS, SETTINGS):
            path = cwd / config / name
            if not os.path.lexists(path):
                continue
            target = path.resolve()
            if target.is_dir():
                found.append(Bind(_blank(data_dir, "empty"), target))
            elif target.exists():
                found.append(Bind(_blank(data_dir, "empty.json"), target))
    return tuple(dict.fromkeys(found))


def _blank(data_dir: Path, name: str) -> Path:
    """An empty directory, or a file holding an empty JSON object (valid settings)."""
    blanks = data_dir / "sandbox"
    blanks.mkdir(parents=True, exist_ok=True)
    blank = blanks / name
    if name.endswith(".json"):
        if not blank.is_file():
            blank.write_text("{}\n")
    else:
        blank.mkdir(exist_ok=True)
    return blank.resolve()

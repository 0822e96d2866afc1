"""Who a root bridge's agents run as, and the files they must own for it.

A bridge running as root would otherwise have agents that are uid 0 on the host: without
capabilities and on a read-only system, but still the owner of root's own files (an env
file with the bot tokens, `/root/.ssh`). So as root the keeper drops the agent to an
unprivileged user before it starts the sandbox (`[sandbox] user`, default `nobody`), and
the bridge hands that user what the agent must write: its workspace, session dir,
private home and config dir, and in a project its worktree's git dirs. Everything on
the way to what the sandbox binds must be searchable by that user; where it is not, the
start is refused with the path that is closed, rather than left to fail inside bwrap.

A bridge that is not root changes nothing: its agents are already its own user.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.rpc.errors import AgentStartError

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

DEFAULT_USER = "nobody"
KEPT_ROOT = frozenset({"root", "0", "0:0"})  # on purpose: agents as uid 0, no capability


@dataclass(frozen=True)
class AgentUser:
    """An unprivileged uid and gid (and the name they were asked for by)."""

    name: str
    uid: int
    gid: int


def agent_user(configured: str, euid: int | None = None) -> AgentUser | None:
    """The user a root bridge's agents run as; None when the bridge is not root, or
    when the operator kept them root on purpose (`user = "root"`, warned at start)."""
    if (os.geteuid() if euid is None else euid) != 0 or configured in KEPT_ROOT:
        return None
    name = configured or DEFAULT_USER
    user_part, _, group_part = name.partition(":")
    try:
        if user_part.isdigit():
            uid = int(user_part)
            gid = int(group_part) if group_part.isdigit() else _primary_group(uid)
        else:
            entry = pwd.getpwnam(user_part)
            uid, gid = entry.pw_uid, entry.pw_gid
            if group_part:
                gid = int(group_part) if group_part.isdigit() else grp.getgrnam(group_part).gr_gid
    except KeyError as exc:
        raise AgentStartError(f"[sandbox] user {name!r}: no such user or group") from exc
    if uid == 0 or gid == 0:
        raise AgentStartError(f"[sandbox] user {name!r}: a root group or user is kept only as root")
    return AgentUser(name, uid, gid)


def _primary_group(uid: int) -> int:
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid  # a bare uid with no passwd entry: its own number as its group


def hand_over(user: AgentUser, paths: Iterable[Path]) -> None:
    """Make `user` the owner of each path and everything below it (links themselves,
    never what they point to). Only what another user owns is changed.

    Walked by directory descriptors (`os.fwalk`), never by path: a folder that an agent
    still running swaps for a link meanwhile is not followed into, so nothing outside
    the agent's own folders can change hands."""
    for top in paths:
        _own(user, str(top), None)
        for _, dirs, files, folder in os.fwalk(top, follow_symlinks=False):
            for name in (*dirs, *files):
                _own(user, name, folder)


def _own(user: AgentUser, name: str, folder: int | None) -> None:
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if (found.st_uid, found.st_gid) != (user.uid, user.gid):
            os.chown(name, user.uid, user.gid, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return  # gone meanwhile


def closed_on_the_way(user: AgentUser, path: Path) -> Path | None:
    """The first directory above `path` (or `path` itself) that `user` cannot search,
    None when every one of them lets it through."""
    for folder in (*reversed(path.parents), path):
        try:
            found = folder.stat()
        except OSError:
            return None  # what is not there is bwrap's business (a `-try` bind)
        if stat.S_ISDIR(found.st_mode) and not _searchable(found, user):
            return folder
    return None


def _searchable(found: os.stat_result, user: AgentUser) -> bool:
    if found.st_uid == user.uid:
        return bool(found.st_mode & stat.S_IXUSR)
    if found.st_gid == user.gid:
        return bool(found.st_mode & stat.S_IXGRP)
    return bool(found.st_mode & stat.S_IXOTH)

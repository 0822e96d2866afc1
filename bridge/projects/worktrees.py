"""One git worktree per conversation, for a chat bound to a git repository.

Each conversation key gets its own branch (`branch_name`) checked out in its own
directory under a root, so agents working on the same repository never see each
other's files. git is run with argv lists, never a shell, always `git -C <dir>`.

Where things are comes from the bridge's own records, never from a file an agent can
write: the directory is `<root>/<slug>`, its admin dir `<common>/worktrees/<slug>`,
and git run by the bridge in the worktree is pointed at them (`in_tree`). The bridge
makes and removes both itself (`bridge.projects.worktree_dirs`): no `git worktree` command, and
nothing else that reads every admin dir (`git branch -D`), is ever run. It writes and
deletes the conversation's branch ref itself too, following no link among the shared
refs and logs (`create_ref`, `delete_ref`): git run by the bridge writes no ref.

Invariants: two keys never share a branch or a directory; `ensure_worktree` is
idempotent; calls on one repository are serialized inside the process, and git's own
lock errors (another process holding `index.lock`, a ref lock, `.git/worktrees`) are
retried a few times before they become a `WorktreeError`.
"""

from __future__ import annotations

import hashlib
import os
import re
import weakref
from dataclasses import dataclass
from pathlib import Path

import anyio

from bridge.projects.git import GUARDED, WorktreeError, git, git_ok
from bridge.projects.worktree_dirs import (
    create_ref,
    delete_ref,
    lay_out,
    pin_common,
    points_back,
    remove_both,
    unlock,
    usable,
)

# Branch and directory names stay short enough to read in `git branch` and a path.
MAX_SLUG = 60
HASH_LENGTH = 12  # hex digits of sha256: 48 bits, collisions out of reach per repository
BASE_CONFIG = "pibase"  # branch.<name>.pibase records the base across restarts

_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_PREFIX = re.compile(r"(?:[a-z0-9][a-z0-9_-]*/)*")


@dataclass(frozen=True)
class Worktree:
    """A conversation's checkout: its directory, its branch, the branch it forked from,
    and its git dirs (its admin dir and the repository's common dir), all named by the
    bridge (`locate`): git run by the bridge in the worktree is pointed at them rather
    than at the `.git` file there, which the agent can rewrite."""

    path: Path
    branch: str
    base: str
    admin: Path
    common: Path

    def git_dirs(self) -> tuple[Path, ...]:
        """What git run by the agent in the worktree must write: its own admin dir
        (HEAD, index) and the repository's shared objects, refs and logs. Not the
        common dir itself: its config and hooks run code in every worktree and in the
        operator's own checkout."""
        shared = [self.common / name for name in ("objects", "refs", "logs")]
        return (self.admin, *(path for path in shared if path.is_dir()))


@dataclass(frozen=True)
class Changes:
    """The uncommitted paths of a worktree (tracked and untracked, not ignored)."""

    paths: tuple[str, ...]

    @property
    def dirty(self) -> bool:
        return bool(self.paths)


def slug(key: str) -> str:
    """A conversation key as a name that is a safe path component and a safe ref part.

    Only [a-z0-9-] survive, so the slug can hold no "..", "@{", ".lock" or "/"; it is
    lower case so that case-insensitive filesystems (loose refs are files) cannot merge
    two names. When that loses anything, a hash of the whole key follows after "_",
    a character no lossless slug contains: a lossy and a lossless slug never meet.
    """
    readable = _NOT_SLUG.sub("-", key.lower()).strip("-")
    if readable and readable == key and len(readable) <= MAX_SLUG:
        return readable
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LENGTH]
    readable = readable[:MAX_SLUG].rstrip("-") or "key"
    return f"{readable}_{digest}"


def branch_name(key: str, prefix: str = "pi/") -> str:
    """The conversation's branch ("tg:-1001234:7" → "pi/tg-1001234-7_<hash>")."""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(f"branch prefix {prefix!r} must be lower-case words ending in '/'")
    return prefix + slug(key)


def parse_status(porcelain_z: str) -> tuple[str, ...]:
    """The paths of `git status --porcelain -z`; a rename's source entry is skipped."""
    entries = porcelain_z.split("\0")
    paths: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if "R" in entry[:2] or "C" in entry[:2]:
            index += 1  # -z puts the original path of a rename/copy in its own field
    return tuple(paths)


async def in_tree(
    worktree: Worktree, *args: str, env: dict[str, str] | None = None, git_dir: Path | None = None
) -> str:
    """Run git inside the worktree, guarded against what the agent may have put there;
    `git_dir` stands for its admin dir when git needs nothing of the agent's there."""
    await anyio.to_thread.run_sync(pin_common, worktree.admin, worktree.common)
    located = dict(env or {})
    located |= {
        "GIT_DIR": str(git_dir or worktree.admin),
        "GIT_COMMON_DIR": str(worktree.common),
        "GIT_WORK_TREE": str(worktree.path),
    }
    return await git_ok(worktree.path, *GUARDED, *args, env=located)


# One lock per repository (its common git dir, shared by all its worktrees). Weak
# values: a lock lives while some call holds it, so the map never grows without bound.
_repo_locks: weakref.WeakValueDictionary[Path, anyio.Lock] = weakref.WeakValueDictionary()


async def _common_dir(repo: Path) -> Path:
    common = await git_ok(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(await anyio.Path(common.strip()).resolve())


async def _repository_lock(common: Path) -> anyio.Lock:
    lock = _repo_locks.get(common)
    if lock is None:
        lock = _repo_locks[common] = anyio.Lock()
    return lock


async def locate(repo: Path, root: Path, key: str, base: str) -> Worktree:
    """The conversation's worktree where the bridge keeps it, whether it exists or not:
    named from the repository, the root and the key alone."""
    common = await _common_dir(repo)
    # Resolved, as git records it: paths are compared with what it wrote.
    name = slug(key)
    path = Path(await anyio.Path(root).resolve()) / name
    return Worktree(path, branch_name(key), base, common / "worktrees" / name, common)


async def is_repository(path: Path) -> bool:
    """Whether `path` is the top of a git work tree (not merely somewhere inside one).

    A subdirectory does not count: a dotfiles repository in $HOME would otherwise make
    any mistyped path under it pass the configuration check.
    """
    if not await anyio.Path(path).is_dir():
        return False
    result = await git(path, "rev-parse", "--show-toplevel")
    if result.code != 0:
        return False
    top = await anyio.Path(result.out.strip()).resolve()
    return top == await anyio.Path(path).resolve()


async def _branch_exists(repo: Path, branch: str) -> bool:
    result = await git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")
    return result.code == 0


async def _default_base(repo: Path, branch: str) -> str:
    """The base recorded for `branch`, else the repository's current HEAD branch."""
    recorded = await git(repo, "config", "--get", f"branch.{branch}.{BASE_CONFIG}")
    if recorded.code == 0 and recorded.out.strip():
        return recorded.out.strip()
    head = await git(repo, "symbolic-ref", "--quiet", "--short", "HEAD")
    if head.code != 0:
        raise WorktreeError(f"{repo} has a detached HEAD: name the base branch")
    return head.out.strip()


async def ensure_worktree(repo: Path, root: Path, key: str, base: str | None = None) -> Worktree:
    """The conversation's worktree under `root`, created on first use.

    A new branch forks from `base` (default: the repository's HEAD branch); a branch
    left by an earlier `remove_worktree` is checked out again as it was. Whatever the
    agent did in an existing worktree (another branch, another `.git`), it is its own.
    """
    branch = branch_name(key)
    common = await _common_dir(repo)
    async with await _repository_lock(common):
        await _check_format(repo)
        await anyio.Path(root).mkdir(parents=True, exist_ok=True)
        tree = await locate(repo, root, key, base or await _default_base(repo, branch))
        if await anyio.to_thread.run_sync(usable, tree.path, tree.admin):
            return tree
        if not await _branch_exists(repo, branch):
            start = await _check_base(repo, tree.base)
            await anyio.to_thread.run_sync(create_ref, common, branch, start)
        await _make(tree)
        await git_ok(repo, "config", f"branch.{branch}.{BASE_CONFIG}", tree.base)
        return tree


async def _check_format(repo: Path) -> None:
    """Refuse what the bridge cannot keep agents apart in; read from the repository's
    config, which agents cannot write."""
    # With it on, a worktree's own config (which its agent can write) is read too.
    if (await git(repo, "config", "--bool", "extensions.worktreeConfig")).out.strip() == "true":
        raise WorktreeError(f"{repo} uses per-worktree config (extensions.worktreeConfig)")
    # The bridge writes branch refs as files (`create_ref`); reftable keeps them elsewhere.
    storage = (await git(repo, "config", "extensions.refStorage")).out.strip()
    if storage not in ("", "files"):
        raise WorktreeError(f"{repo} keeps its refs in {storage} (extensions.refStorage)")


async def _make(tree: Worktree) -> None:
    """Lay the worktree out and fill it from its branch, as `git worktree add` does (its
    hooks aside); whole or not at all."""
    await anyio.to_thread.run_sync(lay_out, tree.path, tree.admin, tree.common, tree.branch)
    try:
        await in_tree(tree, "read-tree", "--reset", "-u", "HEAD")
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(remove_both, tree.path, tree.admin)
        raise
    await anyio.to_thread.run_sync(unlock, tree.admin)


async def _check_base(repo: Path, base: str) -> str:
    """The commit `base` names."""
    if base.startswith("-"):  # it would reach git as an option
        raise WorktreeError(f"base branch '{base}' is not a valid name")
    found = await git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    if found.code != 0:
        raise WorktreeError(f"base branch '{base}' not found in {repo}")
    return found.out.strip()


async def changes(worktree: Worktree) -> Changes:
    """The worktree's uncommitted paths, untracked files included, and `.git` first when
    it is no longer the file git made (the agent replaced or removed it): whatever the
    agent kept there exists nowhere else either."""
    out = await in_tree(
        worktree, "status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=all"
    )
    paths = parse_status(out)
    if not await anyio.to_thread.run_sync(points_back, worktree.path, worktree.admin):
        paths = (".git", *paths)
    return Changes(paths)


async def remove_worktree(
    repo: Path, worktree: Worktree, *, force: bool = False, delete_branch: bool = False
) -> None:
    """Remove the conversation's checkout and its admin dir; its branch stays unless
    `delete_branch`. `worktree` is where the bridge keeps it (`locate`).

    Uncommitted work is refused unless `force`: it exists nowhere else.
    """
    async with await _repository_lock(worktree.common):
        if not force and await anyio.to_thread.run_sync(os.path.lexists, worktree.path):
            pending = await changes(worktree)
            if pending.dirty:
                shown = ", ".join(pending.paths[:5])
                raise WorktreeError(
                    f"{worktree.path} has uncommitted changes ({shown}); "
                    "commit them or remove with force"
                )
        await anyio.to_thread.run_sync(remove_both, worktree.path, worktree.admin)
        if delete_branch:
            await _delete_branch(repo, worktree.common, worktree.branch)


async def delete_branch(repo: Path, branch: str) -> None:
    """Delete the conversation's branch and what the bridge recorded for it."""
    common = await _common_dir(repo)
    async with await _repository_lock(common):
        await _delete_branch(repo, common, branch)


async def _delete_branch(repo: Path, common: Path, branch: str) -> None:
    # Not `git branch -D`: to refuse a branch checked out elsewhere, it first reads
    # every admin dir's `gitdir` and HEAD, which agents write (a `gitdir` linked to
    # /dev/zero takes all the memory there is; a HEAD naming this branch blocks it).
    # Nor `git update-ref -d`: it follows links among the refs and logs (`delete_ref`).
    await anyio.to_thread.run_sync(delete_ref, common, branch)
    await git(repo, "config", "--remove-section", f"branch.{branch}")  # none is fine

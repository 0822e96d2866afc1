"""One git worktree per conversation, for a chat bound to a git repository.

Each conversation key gets its own branch (`branch_name`) checked out in its own
directory under a root, so agents working on the same repository never see each
other's files. Everything here runs git itself (argv lists, never a shell, always
`git -C <dir>`); nothing parses git's object store.

Invariants: two keys never share a branch or a directory; `ensure_worktree` is
idempotent; calls on one repository are serialized inside the process, and git's own
lock errors (another process holding `index.lock`, a ref lock, `.git/worktrees`) are
retried a few times before they become a `WorktreeError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import anyio

from bridge.gitrun import GUARDED, WorktreeError, git, git_ok

# Branch and directory names stay short enough to read in `git branch` and a path.
MAX_SLUG = 60
HASH_LENGTH = 12  # hex digits of sha256: 48 bits, collisions out of reach per repository
BASE_CONFIG = "pibase"  # branch.<name>.pibase records the base across restarts

_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_PREFIX = re.compile(r"(?:[a-z0-9][a-z0-9_-]*/)*")


@dataclass(frozen=True)
class Worktree:
    """A conversation's checkout: its directory, its branch, and the branch it forked from."""

    path: Path
    branch: str
    base: str
    # Its git dirs, found from the repository's side (`_admin_of`): git run by the
    # bridge in the worktree is pointed at them rather than at the `.git` file there,
    # which the agent can rewrite. None: git finds them itself (tests, old callers).
    admin: Path | None = None
    common: Path | None = None

    def git_dirs(self) -> tuple[Path, ...]:
        """What git run by the agent in the worktree must write: its own admin dir
        (HEAD, index) and the repository's shared objects, refs and logs. Not the
        common dir itself: its config and hooks run code in every worktree and in the
        operator's own checkout."""
        if self.admin is None or self.common is None:
            return ()
        shared = [self.common / name for name in ("objects", "refs", "logs")]
        return (self.admin, *(path for path in shared if path.is_dir()))


@dataclass(frozen=True)
class Changes:
    """The uncommitted paths of a worktree (tracked and untracked, not ignored)."""

    paths: tuple[str, ...]

    @property
    def dirty(self) -> bool:
        return bool(self.paths)


@dataclass(frozen=True)
class Diff:
    """What a conversation changed against its base, committed or not.

    Named fields rather than the pair (stat, patch): the file count travels with them.
    """

    stat: str
    patch: str
    files: int


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


def parse_worktree_list(porcelain: str) -> dict[Path, str | None]:
    """`git worktree list --porcelain` as {path: branch ref or None when detached/bare}."""
    found: dict[Path, str | None] = {}
    for block in porcelain.strip().split("\n\n"):
        lines = block.splitlines()
        if not lines or not lines[0].startswith("worktree "):
            continue
        path = Path(lines[0].removeprefix("worktree "))
        refs = [line.removeprefix("branch ") for line in lines if line.startswith("branch ")]
        found[path] = refs[0] if refs else None
    return found


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


async def _in_tree(worktree: Worktree, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git inside the worktree, guarded against what the agent may have put there."""
    located = dict(env or {})
    if worktree.admin is not None and worktree.common is not None:
        await anyio.to_thread.run_sync(_pin_common, worktree.admin, worktree.common)
        located |= {
            "GIT_DIR": str(worktree.admin),
            "GIT_COMMON_DIR": str(worktree.common),
            "GIT_WORK_TREE": str(worktree.path),
        }
    return await git_ok(worktree.path, *GUARDED, *args, env=located)


def _pin_common(admin: Path, common: Path) -> None:
    """Put back a rewritten `<admin>/commondir`: git's ref store reads that file
    whatever GIT_COMMON_DIR says, and the agent can write its admin dir. Replaced,
    never written through (it may have become a link)."""
    marker = admin / "commondir"
    with contextlib.suppress(OSError, ValueError):
        if (
            not marker.is_symlink()
            and (admin / marker.read_text("utf-8").strip()).resolve() == common
        ):
            return
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(marker, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(os.path.relpath(common, admin) + "\n")  # what git writes: "../.."


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


def _admin_of(common: Path, path: Path) -> Path:
    """The admin dir (`<common>/worktrees/<name>`) of the worktree at `path`.

    Looked up from the repository's side: each admin dir's `gitdir` names its
    worktree. The one named after the worktree comes first: another conversation's
    agent can rewrite its own `gitdir`, never this one's.
    """
    claim = str(path / ".git")
    admins = common / "worktrees"
    candidates = [admins / path.name, *sorted(admins.iterdir() if admins.is_dir() else ())]
    for admin in candidates:
        try:
            if (admin / "gitdir").read_text("utf-8").strip() == claim:
                return admin
        except OSError:
            continue
    raise WorktreeError(f"git has no record of the worktree {path}")


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


async def _registered(repo: Path) -> dict[Path, str | None]:
    return parse_worktree_list(await git_ok(repo, "worktree", "list", "--porcelain"))


async def ensure_worktree(repo: Path, root: Path, key: str, base: str | None = None) -> Worktree:
    """The conversation's worktree under `root`, created on first use.

    A new branch forks from `base` (default: the repository's HEAD branch); a branch
    left by an earlier `remove_worktree` is checked out again as it was.
    """
    branch = branch_name(key)
    common = await _common_dir(repo)
    async with await _repository_lock(common):
        # Read from the repository's config, which agents cannot write: with it on,
        # a worktree's own config (which its agent can write) would be read too.
        if (await git(repo, "config", "--bool", "extensions.worktreeConfig")).out.strip() == "true":
            raise WorktreeError(f"{repo} uses per-worktree config (extensions.worktreeConfig)")
        await anyio.Path(root).mkdir(parents=True, exist_ok=True)
        # Resolved, as `git worktree list` prints it: the lookup below compares paths.
        path = Path(await anyio.Path(root).resolve()) / slug(key)
        chosen = base or await _default_base(repo, branch)
        # Metadata of a worktree whose directory was deleted by hand would still list
        # it, and keep its branch "checked out" so that the add below fails.
        await git_ok(repo, "worktree", "prune")
        registered = await _registered(repo)
        if path in registered:
            if registered[path] != f"refs/heads/{branch}":
                raise WorktreeError(f"{path} is a worktree of another branch than {branch}")
            return Worktree(path, branch, chosen, _admin_of(common, path), common)
        if not await _branch_exists(repo, branch):
            await _check_base(repo, chosen)
            # Two steps rather than `worktree add -b`: each is whole or nothing, so a
            # retry after a lock error never meets a half-made branch.
            await git_ok(repo, "branch", "--no-track", branch, chosen)
        await git_ok(repo, "worktree", "add", str(path), branch)
        await git_ok(repo, "config", f"branch.{branch}.{BASE_CONFIG}", chosen)
        return Worktree(path, branch, chosen, _admin_of(common, path), common)


async def _check_base(repo: Path, base: str) -> None:
    if base.startswith("-"):  # it would reach git as an option
        raise WorktreeError(f"base branch '{base}' is not a valid name")
    found = await git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    if found.code != 0:
        raise WorktreeError(f"base branch '{base}' not found in {repo}")


async def changes(worktree: Worktree) -> Changes:
    """The worktree's uncommitted paths, untracked files included."""
    out = await _in_tree(
        worktree, "status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=all"
    )
    return Changes(parse_status(out))


async def diff(worktree: Worktree) -> Diff:
    """Everything the conversation changed since it left its base, committed or not.

    The working tree, untracked files included, is taken as a tree (`snapshot`: a
    throwaway index, never the agent's own, which `git add -N` would change for its
    `git commit`/`git stash`) and compared with the merge-base. The price: blobs of
    untracked files enter the object store until `git gc`.
    """
    merge_base = (await _in_tree(worktree, "merge-base", worktree.base, "HEAD")).strip()
    tree = await snapshot(worktree)
    compare = (
        "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames",
        "--ignore-submodules=all",
    )  # fmt: skip
    stat = await _in_tree(worktree, *compare, "--stat", merge_base, tree)
    patch = await _in_tree(worktree, *compare, merge_base, tree)
    names = await _in_tree(worktree, *compare, "--name-only", "-z", merge_base, tree)
    return Diff(stat, patch, len([name for name in names.split("\0") if name]))


async def snapshot(worktree: Worktree) -> str:
    """The id of a tree object holding the worktree as it is now, untracked files
    included: two snapshots name what changed between them (`changed_between`).

    Staged through a copy of the worktree's own index, whose stat cache spares
    re-reading every unchanged file; the real index is never touched.
    """
    git_path = ("rev-parse", "--path-format=absolute", "--git-path", "index")
    real = Path((await _in_tree(worktree, *git_path)).strip())
    with tempfile.TemporaryDirectory(prefix="pi-snap-") as scratch:
        index = Path(scratch) / "index"
        # A fresh worktree may have no index yet: `add` builds one. copy2 keeps the
        # index's mtime, by which git tells a file changed within the same timestamp
        # tick as the index was written ("racy git") from an unchanged one.
        with contextlib.suppress(FileNotFoundError):
            await anyio.to_thread.run_sync(shutil.copy2, real, index)
        env = {"GIT_INDEX_FILE": str(index)}
        await _in_tree(worktree, "add", "--all", env=env)
        return (await _in_tree(worktree, "write-tree", env=env)).strip()


async def changed_between(worktree: Worktree, before: str, after: str) -> int:
    """How many files differ between two snapshots."""
    if before == after:
        return 0
    names = await _in_tree(worktree, "diff-tree", "-r", "--name-only", "-z", before, after)
    return len([name for name in names.split("\0") if name])


async def remove_worktree(
    repo: Path, worktree: Worktree, *, force: bool = False, delete_branch: bool = False
) -> None:
    """Remove the conversation's checkout; its branch stays unless `delete_branch`.

    Uncommitted work is refused unless `force`: it exists nowhere else.
    """
    async with await _repository_lock(await _common_dir(repo)):
        if await anyio.Path(worktree.path).exists():
            if not force:
                pending = await changes(worktree)
                if pending.dirty:
                    shown = ", ".join(pending.paths[:5])
                    raise WorktreeError(
                        f"{worktree.path} has uncommitted changes ({shown}); "
                        "commit them or remove with force"
                    )
            # The agent may have rewritten the worktree's `.git` file: point it back
            # (git refuses to remove a worktree that does not point at its admin dir).
            await git(repo, *GUARDED, "worktree", "repair", str(worktree.path))
            # Always --force: the check above was made guarded, while without it git
            # runs a `git status` of its own in the worktree, through files the agent
            # can write. GUARDED reaches git's children too (GIT_CONFIG_PARAMETERS).
            await git_ok(repo, *GUARDED, "worktree", "remove", "--force", str(worktree.path))
        await git_ok(repo, "worktree", "prune")
        if delete_branch and await _branch_exists(repo, worktree.branch):
            # -D: the branch may hold commits never merged; deleting was asked for.
            await git_ok(repo, "branch", "-D", worktree.branch)

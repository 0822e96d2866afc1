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

import hashlib
import os
import re
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import anyio

# No git command here touches the network, so a minute means something is stuck.
GIT_TIMEOUT = 60.0
# Another process's lock is usually held for milliseconds (a commit, a ref update).
LOCK_RETRIES = 5
LOCK_BACKOFF = 0.05  # seconds, doubled after each attempt
# Branch and directory names stay short enough to read in `git branch` and a path.
MAX_SLUG = 60
HASH_LENGTH = 12  # hex digits of sha256: 48 bits, collisions out of reach per repository
BASE_CONFIG = "pibase"  # branch.<name>.pibase records the base across restarts

_LABEL = re.compile(r"(fatal|error|warning): (.*)")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_PREFIX = re.compile(r"(?:[a-z0-9][a-z0-9_-]*/)*")
_LOCK_ERRORS = ("could not lock", "cannot lock", "file exists", "index.lock", ".lock'")
# Variables that would point git at another repository than the one given with -C.
_LOCATING_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
)


class WorktreeError(Exception):
    """A git operation on a conversation's worktree failed; the message is for people."""


@dataclass(frozen=True)
class Worktree:
    """A conversation's checkout: its directory, its branch, and the branch it forked from."""

    path: Path
    branch: str
    base: str


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


def plain_error(stderr: str) -> str:
    """git's labelled messages ("fatal: …", "error: …") without their labels.

    The unlabelled lines around them are advice written for a terminal user; they are
    kept only when git printed nothing labelled.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    labelled = [match[2] for line in lines if (match := _LABEL.match(line))]
    return "; ".join(labelled or lines) or "no message"


def _is_lock_error(stderr: str) -> bool:
    lowered = stderr.lower()
    return any(marker in lowered for marker in _LOCK_ERRORS)


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in _LOCATING_VARIABLES}
    # English messages: _is_lock_error and the translations below read them.
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class _Result:
    code: int
    out: str
    err: str


async def _git(where: Path, *args: str, env: dict[str, str] | None = None) -> _Result:
    """Run git in `where`, retrying while another process holds one of git's locks."""
    delay = LOCK_BACKOFF
    for attempt in range(LOCK_RETRIES + 1):
        try:
            with anyio.fail_after(GIT_TIMEOUT):
                done = await anyio.run_process(
                    ["git", "-C", str(where), *args], check=False, env=_environment(env)
                )
        except FileNotFoundError as exc:
            raise WorktreeError("git is not installed (no 'git' on PATH)") from exc
        except TimeoutError as exc:
            raise WorktreeError(f"git {args[0]} took over {GIT_TIMEOUT:.0f} s") from exc
        result = _Result(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )
        if result.code == 0 or attempt == LOCK_RETRIES or not _is_lock_error(result.err):
            return result
        await anyio.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


async def _git_ok(where: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git and return its stdout, or raise WorktreeError with its message."""
    result = await _git(where, *args, env=env)
    if result.code != 0:
        message = plain_error(result.err)
        if "not a git repository" in message:
            raise WorktreeError(f"{where} is not a git repository")
        raise WorktreeError(f"git {args[0]} failed in {where}: {message}")
    return result.out


# One lock per repository (its common git dir, shared by all its worktrees). Weak
# values: a lock lives while some call holds it, so the map never grows without bound.
_repo_locks: weakref.WeakValueDictionary[Path, anyio.Lock] = weakref.WeakValueDictionary()


async def _repository_lock(repo: Path) -> anyio.Lock:
    common = await _git_ok(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    key = Path(await anyio.Path(common.strip()).resolve())
    lock = _repo_locks.get(key)
    if lock is None:
        lock = _repo_locks[key] = anyio.Lock()
    return lock


async def is_repository(path: Path) -> bool:
    """Whether `path` is the top of a git work tree (not merely somewhere inside one).

    A subdirectory does not count: a dotfiles repository in $HOME would otherwise make
    any mistyped path under it pass the configuration check.
    """
    if not await anyio.Path(path).is_dir():
        return False
    result = await _git(path, "rev-parse", "--show-toplevel")
    if result.code != 0:
        return False
    top = await anyio.Path(result.out.strip()).resolve()
    return top == await anyio.Path(path).resolve()


async def _branch_exists(repo: Path, branch: str) -> bool:
    result = await _git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")
    return result.code == 0


async def _default_base(repo: Path, branch: str) -> str:
    """The base recorded for `branch`, else the repository's current HEAD branch."""
    recorded = await _git(repo, "config", "--get", f"branch.{branch}.{BASE_CONFIG}")
    if recorded.code == 0 and recorded.out.strip():
        return recorded.out.strip()
    head = await _git(repo, "symbolic-ref", "--quiet", "--short", "HEAD")
    if head.code != 0:
        raise WorktreeError(f"{repo} has a detached HEAD: name the base branch")
    return head.out.strip()


async def _registered(repo: Path) -> dict[Path, str | None]:
    return parse_worktree_list(await _git_ok(repo, "worktree", "list", "--porcelain"))


async def ensure_worktree(repo: Path, root: Path, key: str, base: str | None = None) -> Worktree:
    """The conversation's worktree under `root`, created on first use.

    A new branch forks from `base` (default: the repository's HEAD branch); a branch
    left by an earlier `remove_worktree` is checked out again as it was.
    """
    branch = branch_name(key)
    lock = await _repository_lock(repo)
    async with lock:
        await anyio.Path(root).mkdir(parents=True, exist_ok=True)
        # Resolved, as `git worktree list` prints it: the lookup below compares paths.
        path = Path(await anyio.Path(root).resolve()) / slug(key)
        chosen = base or await _default_base(repo, branch)
        # Metadata of a worktree whose directory was deleted by hand would still list
        # it, and keep its branch "checked out" so that the add below fails.
        await _git_ok(repo, "worktree", "prune")
        registered = await _registered(repo)
        if path in registered:
            if registered[path] != f"refs/heads/{branch}":
                raise WorktreeError(f"{path} is a worktree of another branch than {branch}")
            return Worktree(path, branch, chosen)
        if not await _branch_exists(repo, branch):
            await _check_base(repo, chosen)
            # Two steps rather than `worktree add -b`: each is whole or nothing, so a
            # retry after a lock error never meets a half-made branch.
            await _git_ok(repo, "branch", "--no-track", branch, chosen)
        await _git_ok(repo, "worktree", "add", str(path), branch)
        await _git_ok(repo, "config", f"branch.{branch}.{BASE_CONFIG}", chosen)
        return Worktree(path, branch, chosen)


async def _check_base(repo: Path, base: str) -> None:
    if base.startswith("-"):  # it would reach git as an option
        raise WorktreeError(f"base branch '{base}' is not a valid name")
    found = await _git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    if found.code != 0:
        raise WorktreeError(f"base branch '{base}' not found in {repo}")


async def changes(worktree: Worktree) -> Changes:
    """The worktree's uncommitted paths, untracked files included."""
    out = await _git_ok(worktree.path, "status", "--porcelain", "-z", "--untracked-files=all")
    return Changes(parse_status(out))


async def diff(worktree: Worktree) -> Diff:
    """Everything the conversation changed since it left its base, committed or not.

    The working tree, untracked files included, is staged into a throwaway index
    (GIT_INDEX_FILE) and compared with the merge-base. `git add -N` in the real index
    would do too, but it changes what the agent's own `git commit`/`git stash` see.
    The price: blobs of untracked files enter the object store until `git gc`.
    """
    where = worktree.path
    merge_base = (await _git_ok(where, "merge-base", worktree.base, "HEAD")).strip()
    with tempfile.TemporaryDirectory(prefix="pi-diff-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        await _git_ok(where, "read-tree", "HEAD", env=index)
        await _git_ok(where, "add", "--all", env=index)
        compare = ("diff", "--cached", "--no-color", "--no-ext-diff", "--find-renames")
        stat = await _git_ok(where, *compare, "--stat", merge_base, env=index)
        patch = await _git_ok(where, *compare, merge_base, env=index)
        names = await _git_ok(where, *compare, "--name-only", "-z", merge_base, env=index)
    return Diff(stat, patch, len([name for name in names.split("\0") if name]))


async def remove_worktree(
    repo: Path, worktree: Worktree, *, force: bool = False, delete_branch: bool = False
) -> None:
    """Remove the conversation's checkout; its branch stays unless `delete_branch`.

    Uncommitted work is refused unless `force`: it exists nowhere else.
    """
    lock = await _repository_lock(repo)
    async with lock:
        if await anyio.Path(worktree.path).exists():
            if not force:
                pending = await changes(worktree)
                if pending.dirty:
                    shown = ", ".join(pending.paths[:5])
                    raise WorktreeError(
                        f"{worktree.path} has uncommitted changes ({shown}); "
                        "commit them or remove with force"
                    )
            removal = ["worktree", "remove", *(["--force"] if force else []), str(worktree.path)]
            await _git_ok(repo, *removal)
        await _git_ok(repo, "worktree", "prune")
        if delete_branch and await _branch_exists(repo, worktree.branch):
            # -D: the branch may hold commits never merged; deleting was asked for.
            await _git_ok(repo, "branch", "-D", worktree.branch)

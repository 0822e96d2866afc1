"""The bridge's own commit of what the agent left uncommitted, for /pr.

The agent never commits for the bridge, and the bridge's git never works in what the
agent can plant: the worktree is staged as a snapshot stages it (a throwaway index
and git dir, new objects in the bridge's scratch dir: `bridge.projects.snapshots`), the
commit is made there (`commit-tree`, which runs no hook and signs only when told), and
its objects reach the repository as one pack written into `objects/pack` through a
descriptor that follows no link; the branch's ref is moved the same way
(`bridge.projects.worktree_dirs`). Last, the agent's index is set to the new commit, so
that its `git status` and /project done see a clean worktree.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.projects.git import WorktreeError, environment, git, git_ok
from bridge.projects.snapshots import drop, objects_env, snapshot
from bridge.projects.worktree_dirs import move_ref, read_ref, write_pack
from bridge.projects.worktrees import in_tree

if TYPE_CHECKING:
    from bridge.projects.worktrees import Worktree

DEFAULT_NAME = "pi-bridge"
DEFAULT_EMAIL = "pi-bridge@localhost"


async def identity(repo: Path) -> dict[str, str]:
    """Who the commit is by: the operator's git identity for the repository (its own
    config and the operator's global one, which no agent writes), else the bridge's."""
    found: dict[str, str] = {}
    for key, default in (("user.name", DEFAULT_NAME), ("user.email", DEFAULT_EMAIL)):
        result = await git(repo, "config", "--get", key)
        found[key] = result.out.strip() if result.code == 0 and result.out.strip() else default
    name, email = found["user.name"], found["user.email"]
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


async def branch_head(tree: Worktree) -> str:
    """The commit the conversation's branch names, read following no link."""
    head = await anyio.to_thread.run_sync(read_ref, tree.common, tree.branch)
    if head is None:
        raise WorktreeError(f"the branch {tree.branch} is gone from {tree.common}")
    return head


async def commit_all(tree: Worktree, repo: Path, scratch: Path, message: str) -> str:
    """Commit everything uncommitted in the worktree onto its branch; the new commit."""
    parent = await branch_head(tree)
    taken = await snapshot(tree, scratch)
    try:
        env = objects_env(tree, taken.objects) | await identity(repo)
        commit = (
            await in_tree(
                tree, "-c", "commit.gpgSign=false", "commit-tree", taken.tree, "-p", parent,
                "-m", message, env=env,
            )
        ).strip()  # fmt: skip
        pack = await pack_between(tree.common, taken.home, env, commit, parent)
        await anyio.to_thread.run_sync(write_pack, tree.common, pack)
    finally:
        await drop(taken)
    await anyio.to_thread.run_sync(move_ref, tree.common, tree.branch, parent, commit)
    await in_tree(tree, "read-tree", commit)  # the agent's index: clean against the commit
    return commit


async def pack_between(
    common: Path, home: Path, env: dict[str, str], tip: str, without: str
) -> list[tuple[str, bytes]]:
    """The objects `tip` has that `without` lacks (found through `env`'s object dirs),
    as a pack and its index made under `home`: what `write_pack` puts in the repository."""
    work = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp("", "pack-", home)))
    listed = await anyio.run_process(
        ["git", "-C", str(work), "pack-objects", "--revs", "--stdout", "-q"],
        input=f"{tip}\n^{without}\n".encode(),
        # The repository's common dir as git dir: nothing the agent writes is read.
        env=environment({**env, "GIT_DIR": str(common)}),
        check=False,
    )
    if listed.returncode != 0:
        raise WorktreeError(f"could not pack {tip}: {listed.stderr.decode(errors='replace')}")
    data = listed.stdout
    await anyio.Path(work / "new.pack").write_bytes(data)
    name = (await git_ok(work, "index-pack", str(work / "new.pack"))).strip().split()[-1]
    index = await anyio.Path(work / "new.idx").read_bytes()
    return [(f"pack-{name}.pack", data), (f"pack-{name}.idx", index)]

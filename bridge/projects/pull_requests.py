"""/pr's work: commit what the agent left (when the person said so), push the
conversation's branch, open its pull request or find the one the branch has, and
read its state. What is said in the chat is `bridge.controls.pull_requests`.

A push is refused before it leaves when there is nothing on the branch that its base
lacks, or when the branch no longer merges with the remote's base (the conflicting
files are named; the person may ask the agent to rebase). A pushed branch that has an
open request updates it: a forge shows a request's new commits by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.projects.commits import branch_head, commit_all
from bridge.projects.forges import ForgeError, place_of
from bridge.projects.git import WorktreeError, git
from bridge.projects.github import GitHub
from bridge.projects.push import PushError, conflicts, push, remote_of

if TYPE_CHECKING:
    from bridge.options import ProjectOptions
    from bridge.projects.forges import Checks, Forge, PullRequest
    from bridge.projects.project import Projects
    from bridge.projects.push import Clash, Remote
    from bridge.projects.worktrees import Worktree

__all__ = ["Conflict", "ForgeError", "Published", "PushError", "WorktreeError"]


class Conflict(PushError):
    """The branch does not merge with the remote's base: these files clash."""

    def __init__(self, base: str, clash: Clash) -> None:
        files = clash.files
        shown = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
        super().__init__("conflict", f"the branch conflicts with {base} in {shown}")
        self.files = files
        self.commit = clash.base  # the remote's base, now in the repository


@dataclass(frozen=True)
class Published:
    """What a push did: the commit the remote's branch now names, the request (None:
    a remote with no forge the bridge speaks), and whether that request is new."""

    commit: str
    request: PullRequest | None
    opened: bool
    url: str  # the remote, as the person may open the request there by hand


async def _parts(projects: Projects) -> tuple[ProjectOptions, Worktree]:
    project, tree = projects.options(), await projects.tree()
    if project is None or tree is None:
        raise PushError("other", "this conversation has no worktree in a configured project")
    return project, tree


async def commit(projects: Projects, message: str) -> str:
    """Commit everything uncommitted in the conversation's worktree, as the bridge."""
    project, tree = await _parts(projects)
    return await commit_all(tree, project.path, await projects.scratch(), message)


async def check(projects: Projects) -> None:
    """Refuse at once what no push could get past: no remote, no token in the bridge's
    environment (before anything is committed or asked of the agent)."""
    project, _ = await _parts(projects)
    await remote_of(project)


def forge_of(project: ProjectOptions, remote: Remote) -> Forge | None:
    place = place_of(project, remote.url)
    return GitHub(place, remote.token) if place is not None else None


async def publish(projects: Projects, title: str, body: str) -> Published:
    """Push the branch and make sure it has its request (opened with `title` and
    `body` when it has none open)."""
    project, tree = await _parts(projects)
    remote = await remote_of(project)
    head = await branch_head(tree)
    ahead = await git(
        tree.common,
        "rev-list",
        "--count",
        f"{tree.base}..{head}",
        env={"GIT_DIR": str(tree.common)},
    )
    if ahead.code == 0 and ahead.out.strip() == "0":
        raise PushError("nothing", f"{tree.branch} has no commit that {tree.base} lacks")
    clash = await conflicts(tree.common, remote, tree.base, head, await projects.scratch())
    if clash is not None:
        raise Conflict(tree.base, clash)
    await push(tree.common, remote, head, tree.branch)
    forge = forge_of(project, remote)
    if forge is None:
        return Published(head, None, False, remote.url)
    found = await forge.find(tree.branch)
    if found is not None and found.state == "open":
        return Published(head, found, False, remote.url)
    made = await forge.open(tree.branch, tree.base, title, body)
    return Published(head, made, True, remote.url)


async def state(projects: Projects, number: int) -> tuple[PullRequest, Checks]:
    """The request's state and its checks, as the forge has them now."""
    project, _ = await _parts(projects)
    remote = await remote_of(project)
    forge = forge_of(project, remote)
    if forge is None:
        raise ForgeError("the project's remote is on no forge the bridge speaks")
    found = await forge.get(number)
    return found, (await forge.checks(found.head) if found.head else "none")

"""Where pull requests are opened: a small `Forge` protocol, and which one a project's
remote is (`forge_for`).

GitHub is the one spoken today (`bridge.projects.github`); GitLab's merge requests and
Gitea's pull requests fit the same three calls (find by branch, open, read the state),
each in a module of its own beside it. A remote that is none of them gets the push
only, and the person opens the request by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from bridge.options import ProjectOptions

GITHUB_API = "https://api.github.com"
# https://host/owner/name(.git), ssh://git@host/owner/name, git@host:owner/name(.git)
_URL = re.compile(
    r"^(?:[a-z+]+://)?(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?[/:](?P<path>.+?)(?:\.git)?/?$"
)
Checks = Literal["passing", "failing", "pending", "none"]


class ForgeError(Exception):
    """The forge refused or could not be reached; the message is for people."""


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    state: Literal["open", "closed", "merged"]
    head: str = ""  # the commit the forge has at the head of the branch
    mergeable: bool | None = None  # None: the forge has not worked it out yet


class Forge(Protocol):
    """The few calls /pr makes of a forge."""

    name: str

    async def find(self, branch: str) -> PullRequest | None:
        """The request from `branch`, open or not, newest first."""

    async def open(self, branch: str, base: str, title: str, body: str) -> PullRequest: ...

    async def get(self, number: int) -> PullRequest: ...

    async def checks(self, commit: str) -> Checks:
        """The checks on `commit`, summed up."""


@dataclass(frozen=True)
class ForgePlace:
    """Which forge a project's requests go to, its API and the repository there."""

    kind: Literal["github"]
    api_url: str
    repository: str


def host_and_path(url: str) -> tuple[str, str] | None:
    """A remote URL's host and repository path (pure); None for a path on disk."""
    if url.startswith(("/", ".", "file:")):
        return None
    found = _URL.match(url)
    return (found["host"].lower(), found["path"]) if found else None


def place_of(project: ProjectOptions, url: str) -> ForgePlace | None:
    """Where the project's requests are opened, from its settings and remote URL;
    None: push only."""
    parsed = host_and_path(url)
    kind = project.forge
    if kind is None:
        kind = "github" if parsed is not None and parsed[0] == "github.com" else "none"
    if kind != "github":
        return None
    repository = project.forge_repository or (parsed[1] if parsed else "")
    if repository.count("/") != 1:
        return None
    return ForgePlace("github", (project.forge_api_url or GITHUB_API).rstrip("/"), repository)

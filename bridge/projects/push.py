"""Pushing a conversation's branch to its project's remote, with the bridge's key.

The push is git run by the bridge with the repository's common dir as its git dir
(the operator's config; nothing the agent writes is read), the commit named by the
bridge (`branch_head`, read following no link) and pushed to the branch of the same
name, forced: the branch is the conversation's own, and the agent may have rebased it.

The token never travels in a URL or an argument. It is handed to git by a credential
helper given on the command line (`-c credential.helper=`, after an empty one that
drops any other helper), which prints it from a variable set in the environment of
that one git process only, never in the bridge's own, never the agent's: the agent
runs in its own PID namespace and cannot read git's environment, which is besides
made non-dumpable as the agent is (`bridge.rpc.nodump`, for an agent of the same user
outside a sandbox), and the bridge's git never runs a hook. Without a token (SSH, or
a remote on disk) git uses the operator's own key, which the agent never sees either
(its HOME is its own). Any message git prints is cleaned of the token before anyone
reads it (`redact`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio

from bridge.projects.commits import pack_between
from bridge.projects.git import GUARDED, git, plain_error
from bridge.projects.worktree_dirs import write_pack
from bridge.rpc import nodump

if TYPE_CHECKING:
    from bridge.options import ProjectOptions

# A push, a fetch of the base or a look at the remote: over the network, a branch's
# worth of objects; past five minutes the remote is not answering.
NETWORK_TIMEOUT = 300.0
TOKEN_VARIABLE = "PI_BRIDGE_GIT_TOKEN"  # in the environment of the pushing git only
USER_VARIABLE = "PI_BRIDGE_GIT_USER"
# git calls it with "get", "store" or "erase"; only "get" answers. Both values come from
# the environment: the command line (which `ps` shows) holds no secret.
HELPER = (
    '!f() { test "$1" = get || exit 0; '
    f'printf "username=%s\\npassword=%s\\n" "${USER_VARIABLE}" "${TOKEN_VARIABLE}"; }}; f'
)
PUSH_GUARD = (
    *GUARDED,
    "-c", "credential.helper=",  # the empty value drops every helper configured before
    "-c", f"credential.helper={HELPER}",
    "-c", "core.askPass=",
    "-c", "push.gpgSign=false",
)  # fmt: skip
Refusal = Literal["nothing", "protected", "access", "unreachable", "conflict", "other"]
# What a remote says, by kind, in the words of git and the forges (GitHub's GH006 for a
# protected branch, GitLab's "You are not allowed to push", an HTTP 401/403).
_KINDS: tuple[tuple[Refusal, re.Pattern[str]], ...] = (
    ("protected", re.compile(r"protected branch|GH006|not allowed to (force )?push|pre-receive hook declined", re.I)),  # noqa: E501
    ("access", re.compile(r"authentication failed|could not read (username|password)|403|401|permission denied|not found|access denied|invalid username or password", re.I)),  # noqa: E501
    ("unreachable", re.compile(r"could not resolve host|connection refused|timed out|unable to access|network is unreachable|does not appear to be a git repository", re.I)),  # noqa: E501
)  # fmt: skip


class PushError(Exception):
    """The remote or git refused; `kind` says which way, the message is for people."""

    def __init__(self, kind: Refusal, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Remote:
    """Where a project's branches go: its URL, and the token for it (None: git's own
    way, SSH with the operator's key or a path on disk)."""

    url: str
    token: str | None
    user: str

    def redact(self, text: str) -> str:
        return text.replace(self.token, "***") if self.token else text

    def env(self) -> dict[str, str]:
        """The pushing git's environment: the token (if any), and the operator's SSH
        agent for an SSH remote."""
        env = {USER_VARIABLE: self.user, TOKEN_VARIABLE: self.token or ""}
        if agent := os.environ.get("SSH_AUTH_SOCK"):
            env["SSH_AUTH_SOCK"] = agent
        if self.token and (preload := nodump.library()) is not None:
            # git and what it starts (the helper, git-remote-https) made non-dumpable as
            # the agent is: a process of the same user cannot read their environment.
            env["LD_PRELOAD"] = str(preload)
        return env


@dataclass(frozen=True)
class Clash:
    """The remote's base commit, and the files on which the branch conflicts with it."""

    base: str
    files: tuple[str, ...]


def refusal(stderr: str) -> Refusal:
    """What kind of refusal git's message tells (pure)."""
    for kind, pattern in _KINDS:
        if pattern.search(stderr):
            return kind
    return "other"


def is_url(remote: str) -> bool:
    """A URL or a path, rather than a remote's name ("origin")."""
    return "/" in remote or ":" in remote


async def remote_of(project: ProjectOptions) -> Remote:
    """The project's remote: its URL (a remote's named URL from the repository's config,
    which the operator wrote), and the token from the bridge's environment."""
    url = project.remote
    if not is_url(url):
        found = await git(project.path, "config", "--get", f"remote.{url}.url")
        if found.code != 0 or not found.out.strip():
            raise PushError("other", f"the repository has no remote named {url}")
        url = found.out.strip()
    token = os.environ.get(project.remote_token_env) if project.remote_token_env else None
    if project.remote_token_env and not token:
        raise PushError(
            "access", f"{project.remote_token_env} is not set in the bridge's environment"
        )
    return Remote(url, token or None, project.remote_user)


async def remote_head(common: Path, remote: Remote, branch: str) -> str | None:
    """The commit `branch` names on the remote; None when it has no such branch."""
    result = await git(
        common, *PUSH_GUARD, "ls-remote", "--heads", "--", remote.url, f"refs/heads/{branch}",
        env={"GIT_DIR": str(common), **remote.env()}, limit=NETWORK_TIMEOUT,
    )  # fmt: skip
    if result.code != 0:
        message = remote.redact(plain_error(result.err))
        raise PushError(refusal(message), f"the remote could not be read: {message}")
    line = result.out.strip().splitlines()
    return line[0].split()[0] if line else None


async def push(common: Path, remote: Remote, commit: str, branch: str) -> None:
    """Make the remote's `branch` name `commit`."""
    result = await git(
        common, *PUSH_GUARD, "push", "--porcelain", "--no-verify", "--", remote.url,
        f"+{commit}:refs/heads/{branch}",
        env={"GIT_DIR": str(common), **remote.env()}, limit=NETWORK_TIMEOUT,
    )  # fmt: skip
    if result.code != 0:
        message = remote.redact(push_message(result.err, result.out))
        raise PushError(refusal(message), message)


def push_message(stderr: str, porcelain: str) -> str:
    """What the remote said of a refused push (pure): its own lines ("remote: …", a
    forge's reason), and the refused ref's reason from `--porcelain`; else git's."""
    said = [line[len("remote:") :].strip() for line in stderr.splitlines()]
    said = [line for line, raw in zip(said, stderr.splitlines(), strict=True)
            if raw.startswith("remote:") and line]  # fmt: skip
    reasons = [line.split("\t")[-1] for line in porcelain.splitlines() if line.startswith("!")]
    return "; ".join([*said, *reasons]) or plain_error(stderr)


async def conflicts(
    common: Path, remote: Remote, base: str, commit: str, scratch: Path
) -> Clash | None:
    """Where `commit` conflicts with the remote's `base` (None: it merges, or the remote
    has no such branch). What is fetched and merged goes into an object dir under
    `scratch` (the bridge's), none into the repository, but for a conflict's base
    commits (`_merged`); no ref is written."""
    head = await remote_head(common, remote, base)
    if head is None:
        return None
    await anyio.Path(scratch).mkdir(parents=True, exist_ok=True)
    own = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp("", "merge-", scratch)))
    try:
        objects = {
            "GIT_DIR": str(common),
            "GIT_OBJECT_DIRECTORY": str(own),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": quoted(common / "objects"),
        }
        return await _merged(common, remote, base, head, commit, objects)
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(own, ignore_errors=True))


def quoted(path: Path) -> str:
    """A path as git's alternates list takes it (C-quoted: the list splits on ":")."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


async def _merged(
    common: Path, remote: Remote, base: str, head: str, commit: str, objects: dict[str, str]
) -> Clash | None:
    fetched = await git(
        common, *PUSH_GUARD, "fetch", "--no-tags", "--no-write-fetch-head", "--",
        remote.url, f"refs/heads/{base}", env=objects | remote.env(), limit=NETWORK_TIMEOUT,
    )  # fmt: skip
    if fetched.code != 0:
        message = remote.redact(plain_error(fetched.err))
        raise PushError(refusal(message), f"{base} could not be fetched: {message}")
    merged = await git(
        common, *GUARDED, "merge-tree", "--write-tree", "--name-only", "--no-messages",
        head, commit, env=objects,
    )  # fmt: skip
    if merged.code == 0:
        return None
    if merged.code != 1:
        raise PushError("other", f"could not compare with {base}: {plain_error(merged.err)}")
    # The agent is to bring the remote's base in, which it cannot fetch (it has no key):
    # its commits go into the repository, as one pack written following no link.
    own = Path(objects["GIT_OBJECT_DIRECTORY"])
    pack = await pack_between(common, own, objects, head, commit)
    await anyio.to_thread.run_sync(write_pack, common, pack)
    return Clash(head, tuple(line for line in merged.out.splitlines()[1:] if line.strip()))

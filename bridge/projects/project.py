"""A conversation's project: the repository it works in, its worktree, what it changed.

A conversation is in a project when it picked one with /project, or else when its
chat is bound to one (`[chats."<key>"] project`); "" in its record means it chose to
be in none. Its first agent start makes its worktree (`bridge.projects.worktrees`, git
itself), which is recorded (`ConversationRecord.checkout`) and stays the agent's cwd
across agent and bridge restarts, until /project done removes it. A conversation
outside any project works in its workspace directory, as it always did.

pi resumes a session in the directory it was started in, and will not start on one
that is gone; so entering or leaving a worktree starts a new session (the old one
stays listed by /sessions).

A run's changed files are counted between two snapshots of the worktree (one taken
before the prompt, one at the run's end), so the count is that run's own, whichever
tool made the change. Their objects are kept under the data dir, which no agent sees
(`bridge.projects.snapshots`), only as long as the count needs them.

/project done removes what the bridge made, found from its own records (`locate`),
whatever the agent did to its worktree's git; the conversation is out of the project
as soon as the worktree is gone, even when deleting its branch then fails.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.containment.hidden import Sight, bound_back, hidden_paths
from bridge.containment.sandbox import config_of, home_of
from bridge.options import safe_name
from bridge.projects.git import WorktreeError
from bridge.projects.snapshots import Diff, Snapshot, changed_between, diff, drop, snapshot
from bridge.projects.worktrees import (
    Worktree,
    changes,
    delete_branch,
    ensure_worktree,
    locate,
    remove_worktree,
)
from bridge.rpc.errors import AgentStartError
from bridge.store.records import Checkout

if TYPE_CHECKING:
    from bridge.options import BridgeOptions, ProjectOptions
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)


class ProjectConversation(Protocol):
    """The conversation a project belongs to, as the project sees it."""

    key: str

    @property
    def record(self) -> ConversationRecord | None: ...

    async def save(self, **changes: object) -> None: ...

    async def reap(self) -> None: ...


class Projects:
    """One conversation's project, its worktree, and its runs' changed files."""

    def __init__(self, host: ProjectConversation, options: BridgeOptions) -> None:
        self._host = host
        self._options = options
        self._before: Snapshot | None = None  # what the next run is measured from
        self._swept = False  # snapshots a stopped bridge left behind are removed
        self._tree: Worktree | None = None  # the worktree with its git dirs, once found

    @property
    def _record(self) -> ConversationRecord:
        record = self._host.record
        assert record is not None
        return record

    def name(self) -> str | None:
        """The project this conversation works in, if any."""
        record = self._record
        if record.checkout is not None:
            return record.checkout.project
        chosen = record.project
        return (self._options.bound_project(self._host.key) if chosen is None else chosen) or None

    def allowed(self) -> list[str]:
        return self._options.projects_for(self._host.key)

    def checkout(self) -> Checkout | None:
        """The conversation's worktree as recorded (None before its first start)."""
        return self._record.checkout

    def tidy_on_new(self) -> bool:
        project = self._project(self.name())
        return project is not None and project.done_on_new and self._record.checkout is not None

    async def workspace(self) -> Path:
        """The agent's cwd: the worktree, made on first use; outside a project, the
        configured workspace, else the conversation's own directory."""
        record, name = self._record, self.name()
        if name is None:
            chat = self._options.chat(self._host.key)
            return chat.workspace if chat and chat.workspace else Path(record.workspace)
        tree = self._tree = await self._ensure(name)
        checkout = Checkout(project=name, path=str(tree.path), branch=tree.branch, base=tree.base)
        if record.checkout != checkout:
            await self._host.save(checkout=checkout)
        return tree.path

    def git_dirs(self) -> tuple[Path, ...]:
        """What the agent's sandbox must let git write besides the worktree (after
        `workspace`)."""
        return self._tree.git_dirs() if self._tree is not None and self.name() else ()

    def sight(self, workspace: Path) -> Sight:
        """What the agent working in `workspace` sees of the files, as its sandbox
        (`bridge.containment.sandbox.contain`) shows them, whatever the sandbox mode: the bridge's
        own reads on its behalf show no more. File work (paths are resolved)."""
        options, key = self._options, self._host.key
        policy = options.agent.sandbox
        folders = [workspace, Path(self._record.session_dir)]
        folders += [home_of(options, key), config_of(options, key), *self.git_dirs()]
        shown = (*folders, *policy.read_write, *policy.read_only, *bound_back())
        seen = dict.fromkeys(p.resolve() for p in shown)
        return Sight(hidden_paths(options, key, workspace), tuple(seen))

    async def _located(self) -> Worktree | None:
        """The recorded worktree with its git dirs found from the repository's side,
        so that git run by the bridge never reads the `.git` file the agent can
        rewrite; made again if its directory is gone."""
        checkout = self._record.checkout
        if checkout is None:
            return None
        if self._tree is None or str(self._tree.path) != checkout.path:
            self._tree = await self._ensure(checkout.project)
        return self._tree

    def _root(self, name: str) -> Path:
        return self._options.data_dir / "worktrees" / safe_name(name)

    @property
    def _scratch(self) -> Path:
        """Where the conversation's snapshots keep their objects: in the data dir, which
        no agent's sandbox shows."""
        return self._options.data_dir / "snapshots" / safe_name(self._host.key)

    async def _ensure(self, name: str) -> Worktree:
        project = self._project(name)
        if project is None:
            raise AgentStartError(f"project {name} is not configured here; /project picks one")
        checkout = self._record.checkout
        base = checkout.base if checkout is not None else project.base
        try:
            return await ensure_worktree(project.path, self._root(name), self._host.key, base)
        except WorktreeError as exc:
            raise AgentStartError(
                f"the worktree of project {name} could not be made: {exc}"
            ) from exc

    def _project(self, name: str | None) -> ProjectOptions | None:
        return self._options.projects.get(name) if name is not None else None

    # --- runs ---------------------------------------------------------------------------

    async def before_run(self) -> None:
        """A prompt is about to start a run: what it changes is counted from now."""
        earlier, self._before = self._before, await self._snapshot()
        await drop(earlier)

    async def run_ended(self) -> int:
        """How many files the run that just ended changed in the worktree (0 when
        unknown: outside a project, or git failed, which the log says)."""
        before = self._before
        after = self._before = await self._snapshot()
        try:
            if before is None or after is None or self._tree is None:
                return 0
            return await changed_between(self._tree, before, after)
        except WorktreeError as exc:
            log.warning("conversation %s: %s", self._host.key, exc)
            return 0
        finally:
            await drop(before)

    async def _snapshot(self) -> Snapshot | None:
        if self._record.checkout is None:
            return None
        scratch = await self._fresh_scratch()
        try:
            tree = await self._located()
            return await snapshot(tree, scratch) if tree is not None else None
        except (WorktreeError, AgentStartError) as exc:
            log.warning("conversation %s: %s", self._host.key, exc)
            return None

    async def _fresh_scratch(self) -> Path:
        """The scratch dir, emptied on first use of what a stopped bridge left there:
        snapshots are held in memory only. Moved aside before anything is awaited, so
        that no snapshot of this process can be in what is removed."""
        scratch = self._scratch
        if not self._swept:
            self._swept = True
            stale = scratch.with_name(f".stale-{secrets.token_hex(8)}")  # no key's name
            with contextlib.suppress(FileNotFoundError):
                scratch.rename(stale)
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(stale, ignore_errors=True))
        return scratch

    # --- commands -----------------------------------------------------------------------

    async def choose(self, name: str) -> str:
        """Move the conversation into project `name`; what to tell the person."""
        allowed = self.allowed()
        if name not in allowed:
            here = ", ".join(allowed) or "none"
            return f"⚠️ There is no project {name} for this chat (projects here: {here})."
        checkout = self._record.checkout
        if checkout is not None:
            if checkout.project == name:
                return f"Already working in {name}, on branch {checkout.branch}."
            return f"⚠️ This conversation works in {checkout.project}; /project done first."
        await self._host.reap()  # its cwd changes: the next message starts it there
        await self._host.save(project=name, session_file=None)
        await self.workspace()  # made now, so that a problem shows at once
        made = self._record.checkout
        assert made is not None
        return (
            f"📁 Project {name}: this conversation works on branch {made.branch}, "
            f"forked from {made.base}, in its own worktree. A new session starts there "
            "with your next message."
        )

    async def diff(self) -> Diff | None:
        """The conversation's change against its base (None: no worktree)."""
        scratch = await self._fresh_scratch()
        tree = await self._located()
        return await diff(tree, scratch) if tree is not None else None

    async def pending(self) -> tuple[str, ...] | None:
        """The worktree's uncommitted paths (None: no worktree)."""
        tree = await self._located()
        return (await changes(tree)).paths if tree is not None else None

    async def remove(self, *, discard: bool) -> str:
        """Remove the worktree (with `discard`, its changes and branch too)."""
        checkout = self._record.checkout
        if checkout is None:
            return "This conversation has no worktree."
        project = self._project(checkout.project)
        if project is None:
            return f"⚠️ Project {checkout.project} is no longer configured; its worktree stays."
        root = self._root(checkout.project)
        tree = await locate(project.path, root, self._host.key, checkout.base)
        if (str(tree.path), tree.branch) != (checkout.path, checkout.branch):
            raise WorktreeError(
                f"the recorded worktree {checkout.path} (branch {checkout.branch}) is not "
                "where this bridge keeps it; it is left as it is"
            )
        await self._host.reap()  # nothing may run in a directory being removed
        await remove_worktree(project.path, tree, force=discard)
        self._tree = None
        await drop(self._before)
        self._before = None
        scratch = self._scratch
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))
        await self._host.save(checkout=None, project="", session_file=None)
        back = f"/project {checkout.project} picks it up again."
        if not discard:
            return (
                f"🧹 Removed the worktree; branch {checkout.branch} is kept. This "
                f"conversation is back in its own workspace; {back}"
            )
        try:
            await delete_branch(project.path, tree.branch)
        except WorktreeError as exc:
            return f"🗑 Discarded the worktree; its branch {tree.branch} is kept ({exc}). {back}"
        return f"🗑 Discarded the worktree and branch {checkout.branch}. {back}"

    # --- pull requests (bridge/projects/pull_requests.py) --------------------------------

    # /pr asked the agent for a title and description: its next run's end answers.
    summary_wanted = False

    async def tree(self) -> Worktree | None:
        """The worktree with its git dirs as the bridge names them (None: no worktree)."""
        return await self._located()

    def options(self) -> ProjectOptions | None:
        """The settings of the project the conversation's worktree is in."""
        checkout = self._record.checkout
        return self._project(checkout.project) if checkout is not None else None

    async def scratch(self) -> Path:
        """A dir of the bridge's own for the conversation's throwaway git objects."""
        return await self._fresh_scratch()

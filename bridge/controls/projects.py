"""/project and /diff: which repository a conversation works in, and what it changed.

`/project` names the conversation's project and branch, with a button per project
this chat may use while it has no worktree; `/project <name>` moves it into one;
`/project done` removes its worktree when nothing is uncommitted there, and otherwise
(or when its changes cannot be read) asks [Keep] [Discard]. `/diff` shows the change
against the base: git's `--stat` in the message, the whole diff as a file. The work
itself is `bridge.projects.project`'; here it is only asked for and shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.controls.common import picker
from bridge.controls.handling import Picker
from bridge.model import Upload
from bridge.projects.git import WorktreeError
from bridge.render.textbits import count
from bridge.rpc.errors import AgentStartError

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op

STAT_LINES = 30  # files listed in the message; the attachment has them all
MAX_DIFF_BYTES = 20 * 2**20  # under Telegram's 50 MB for bots, as /export
NO_PROJECT = "This conversation works in its own workspace, in no project."
NONE_HERE = "No projects are set up for this chat (docs/configuration.md, “Projects”)."
NO_WORKTREE = "This conversation has no worktree: /diff shows a project's change (see /project)."
KEEP, DISCARD = "keep", "discard"


async def project(target: Target, arg: str) -> list[Op]:
    """`/project`, `/project <name>`, `/project done`."""
    word = arg.strip()
    try:
        if word.lower() == "done":
            return await done(target)
        if word:
            return target.renderer.notice(await target.projects.choose(word))
        return _show(target)
    except (WorktreeError, AgentStartError) as exc:
        return target.renderer.notice(f"⚠️ {exc}")


def _show(target: Target) -> list[Op]:
    projects = target.projects
    name, checkout, allowed = projects.name(), projects.checkout(), projects.allowed()
    if checkout is not None:
        text = (
            f"📁 Project {checkout.project}: branch `{checkout.branch}`, forked from "
            f"`{checkout.base}`. /diff shows its change; /project done removes the "
            "worktree when you are finished."
        )
        return target.renderer.notice(text, markdown=True)
    if name is not None:
        made = f"📁 Project {name}: its worktree is made with this conversation's next message."
        return target.renderer.notice(made)
    if not allowed:
        return target.renderer.notice(f"{NO_PROJECT} {NONE_HERE}")
    return picker(target, CHOOSE, f"{NO_PROJECT} Work in a project?", allowed)


async def done(target: Target) -> list[Op]:
    """Remove the worktree, or ask first when it holds uncommitted changes, or when its
    changes cannot be read (whatever the agent did there, Discard still removes it)."""
    projects = target.projects
    try:
        pending = await projects.pending()
    except (WorktreeError, AgentStartError) as exc:
        return _keep_or_discard(target, f"Its changes could not be read ({exc}).")
    if pending is None:
        return target.renderer.notice("This conversation has no worktree.")
    if not pending:
        return target.renderer.notice(await projects.remove(discard=False))
    shown = ", ".join(pending[:5]) + (f" and {len(pending) - 5} more" if len(pending) > 5 else "")
    found = f"The worktree has {count(len(pending), 'uncommitted change')}: {shown}."
    return _keep_or_discard(target, found)


def _keep_or_discard(target: Target, found: str) -> list[Op]:
    checkout = target.projects.checkout()
    assert checkout is not None
    question = f"{found} Keep it as it is, or discard the changes and the branch {checkout.branch}?"
    return picker(target, DONE, question, [KEEP, DISCARD], ["Keep", "Discard"])


async def decided(target: Target, choice: str) -> list[Op]:
    """[Keep] or [Discard] was pressed."""
    if choice != DISCARD:
        return target.renderer.notice("Kept: the worktree and its changes stay as they are.")
    try:
        return target.renderer.notice(await target.projects.remove(discard=True))
    except (WorktreeError, AgentStartError) as exc:
        return target.renderer.notice(f"⚠️ {exc}")


CHOOSE = Picker("project", project)  # a project's button: `/project <name>`
DONE = Picker("project_done", decided)  # [Keep] or [Discard]


async def diff(target: Target, arg: str) -> list[Op]:
    """The conversation's change against its base: a summary, and the diff as a file."""
    projects = target.projects
    try:
        found = await projects.diff()
    except (WorktreeError, AgentStartError) as exc:
        return target.renderer.notice(f"⚠️ {exc}")
    checkout = projects.checkout()
    if found is None or checkout is None:
        return target.renderer.notice(NO_WORKTREE)
    where = f"`{checkout.branch}` against `{checkout.base}`"
    if found.files == 0:
        return target.renderer.notice(f"No changes on {where} yet.", markdown=True)
    lines = found.stat.rstrip("\n").splitlines()
    if len(lines) > STAT_LINES + 1:  # + git's summary line, always kept
        hidden = len(lines) - STAT_LINES - 1
        lines = [*lines[:STAT_LINES], f" … {hidden} more", lines[-1]]
    body = "\n".join(lines)
    text = f"📝 {count(found.files, 'file')} changed on {where}:\n```\n{body}\n```"
    ops = target.renderer.notice(text, markdown=True)
    data = found.patch.encode()
    if len(data) > MAX_DIFF_BYTES:
        too_big = f"The whole diff is over {MAX_DIFF_BYTES / 2**20:g} MB; not attached."
        return ops + target.renderer.notice(too_big)
    name = checkout.branch.replace("/", "-") + ".diff"
    caption = f"Diff of {checkout.branch} against {checkout.base}"
    slot = f"diff:{target.new_token()}"
    return [*ops, Upload(slot=slot, filename=name, data=data, caption=caption)]

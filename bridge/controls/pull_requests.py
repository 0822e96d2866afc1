"""/pr: from a project conversation's branch to a pull request, the bridge holding the key.

`/pr [title]` (the description on the lines below the title) walks the steps, each
push behind a button only the owner or an approver may press (`Picker.guarded`):
what the agent left uncommitted is listed and committed by the bridge on [Commit and
push]; a branch with no request yet gets its title and description from the person's
words or else from the agent, asked in the conversation (a prompt and its answer, which
stay in the session), shown with [Open pull request] [Edit…] [Cancel]; a branch with
new commits since its last push asks [Push]; with nothing new, /pr tells the request's
state (open, checks, merged). The draft and what was opened live in the conversation's
record (`PullRequestRecord`), so a restart or another worker carries on. The work itself
is `bridge.projects.pull_requests`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.controls.common import data, picker
from bridge.controls.handling import Picker
from bridge.projects import pull_requests as work
from bridge.projects.commits import branch_head
from bridge.render.textbits import clip, count
from bridge.rpc.commands import GetLastAssistantText
from bridge.rpc.errors import AgentStartError
from bridge.store.records import PullRequestRecord

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op
    from bridge.rpc.client import AgentClient

NO_WORKTREE = "This conversation has no worktree: /pr pushes a project's branch (see /project)."
LISTED = 20  # files named in the commit question
MAX_TITLE = 200
SHOWN_BODY = 1500  # of the description in the question: one message on every platform
SUMMARY_PROMPT = (
    "Write a pull request for the changes on this branch: on the first line a short "
    "title (no more than 70 characters, no quotes or markdown heading), then an empty "
    "line, then a description of what changed and why, for a reviewer. Reply with the "
    "pull request text only; do not run any command."
)
REBASE_PROMPT = (
    "This branch conflicts with {base} as it is on the remote, which is commit {commit} "
    "(already in this repository; no fetch is needed), in: {files}. Rebase this branch "
    "onto {commit} (or merge it in) and resolve the conflicts, keeping the intent of both "
    "sides; commit the result."
)
_CAUSES = {
    "nothing": "Nothing to push",
    "protected": "The remote refused the push (a protected branch)",
    "access": "The remote refused the push (no access)",
    "unreachable": "The remote could not be reached",
    "conflict": "Not pushed",
    "other": "Not pushed",
}
ERRORS = (work.PushError, work.ForgeError, work.WorktreeError, AgentStartError)


def words(arg: str) -> tuple[str, str]:
    """The person's title (the first line) and description (the lines below it)."""
    title, _, body = arg.strip().partition("\n")
    return title.strip()[:MAX_TITLE], body.strip()


def from_agent(text: str) -> tuple[str, str]:
    """A title and description from the agent's answer: its first line, cleaned of a
    heading's or label's marks, and the rest."""
    lines = text.strip().splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return "", ""
    title = lines[0].strip().lstrip("#").strip()
    if title.lower().startswith("title:"):
        title = title[len("title:") :].strip()
    title = title.strip("*_").strip()
    body = "\n".join(lines[1:]).strip()
    if body.lower().startswith("description:"):
        body = body[len("description:") :].strip()
    return title.strip("\"'`")[:MAX_TITLE], body


def _draft(target: Target) -> PullRequestRecord:
    record = target.record
    return (record.pull_request if record else None) or PullRequestRecord()


async def _keep(target: Target, draft: PullRequestRecord) -> None:
    await target.save(pull_request=draft)


async def pr(target: Target, arg: str) -> list[Op]:
    """`/pr [title]`: the next step from where the branch is."""
    projects = target.projects
    if projects.checkout() is None:
        return target.renderer.notice(NO_WORKTREE)
    draft = _draft(target)
    if arg.strip():
        title, body = words(arg)
        draft = draft.model_copy(update={"title": title, "body": body})
        await _keep(target, draft)
    try:
        await work.check(projects)
        pending = await projects.pending()
        if pending:
            return _ask_commit(target, pending)
        return await _next(target, draft)
    except ERRORS as exc:
        return _refused(target, exc)


def _ask_commit(target: Target, pending: tuple[str, ...]) -> list[Op]:
    checkout = target.projects.checkout()
    assert checkout is not None
    shown = "\n".join(f"• {path}" for path in pending[:LISTED])
    more = f"\n… and {len(pending) - LISTED} more" if len(pending) > LISTED else ""
    question = (
        f"The worktree has {count(len(pending), 'uncommitted file')}:\n{shown}{more}\n"
        f"Commit them to {checkout.branch} and push?"
    )
    return picker(target, COMMIT, question, ["commit", "cancel"], ["Commit and push", "Cancel"])


async def _next(target: Target, draft: PullRequestRecord) -> list[Op]:
    """With a clean worktree: state, a push of what is new, or a draft to confirm."""
    if draft.pushed:
        tree = await target.projects.tree()
        head = await branch_head(tree) if tree is not None else draft.pushed
        if head == draft.pushed:
            return await _state(target, draft)
        where = f"pull request #{draft.number}" if draft.number else "the remote"
        question = f"The branch has new commits since its last push. Push them to {where}?"
        return picker(target, OPEN, question, ["open", "cancel"], ["Push", "Cancel"])
    if draft.title:
        return _ask_open(target, draft)
    return await _ask_agent(target)


def _ask_open(target: Target, draft: PullRequestRecord) -> list[Op]:
    checkout = target.projects.checkout()
    assert checkout is not None
    question = (
        f"Open a pull request from {checkout.branch} into {checkout.base}?\n\n"
        f"{draft.title}\n\n{clip(draft.body, SHOWN_BODY) or '(no description)'}"
    )
    labels = ["Open pull request", "Edit…", "Cancel"]
    return picker(target, OPEN, question, ["open", "edit", "cancel"], labels, one_per_row=True)


async def _ask_agent(target: Target) -> list[Op]:
    """The agent writes the title and description (`summarized` takes its answer)."""
    agent = await target.ensure_agent()
    target.projects.summary_wanted = True
    try:
        await agent.prompt(SUMMARY_PROMPT)
    except BaseException:
        target.projects.summary_wanted = False
        raise
    return target.renderer.notice("📝 Asking the agent for the pull request's title and text…")


async def summarized(target: Target, agent: AgentClient) -> list[Op]:
    """The run /pr asked for ended: its answer becomes the draft, shown to confirm."""
    target.projects.summary_wanted = False
    response = await agent.request(GetLastAssistantText(), check=False)
    title, body = from_agent(str(data(response.data).get("text") or ""))
    if not title:
        return target.renderer.notice(
            "The agent wrote no title. Use /pr <title>, the description on the lines below."
        )
    draft = _draft(target).model_copy(update={"title": title, "body": body})
    await _keep(target, draft)
    return _ask_open(target, draft)


async def committed(target: Target, choice: str) -> list[Op]:
    """[Commit and push] or [Cancel] was pressed."""
    if choice != "commit":
        return target.renderer.notice("Cancelled: nothing committed, nothing pushed.")
    draft = _draft(target)
    try:
        made = await work.commit(target.projects, draft.title or "Work from the conversation")
    except ERRORS as exc:
        return _refused(target, exc)
    ops = target.renderer.notice(f"✅ Committed {made[:10]}.")
    try:
        if draft.title or draft.pushed:
            return ops + await _publish(target, draft)
        return ops + await _ask_agent(target)
    except ERRORS as exc:
        return ops + _refused(target, exc)


async def opened(target: Target, choice: str) -> list[Op]:
    """[Open pull request] / [Push], [Edit…] or [Cancel] was pressed."""
    draft = _draft(target)
    if choice == "edit":
        text = (
            "To use your own words, send /pr with the title, and the description on the "
            f"lines below it. The draft was:\n\n{draft.title}\n\n{clip(draft.body, SHOWN_BODY)}"
        )
        return target.renderer.notice(text)
    if choice != "open":
        return target.renderer.notice("Cancelled: nothing pushed.")
    try:
        return await _publish(target, draft)
    except ERRORS as exc:
        return _refused(target, exc)


async def _publish(target: Target, draft: PullRequestRecord) -> list[Op]:
    checkout = target.projects.checkout()
    assert checkout is not None
    done = await work.publish(target.projects, draft.title or checkout.branch, draft.body)
    request = done.request
    changes: dict[str, object] = {"pushed": done.commit}
    if request is not None:
        changes |= {"number": request.number, "url": request.url}
    await _keep(target, draft.model_copy(update=changes))
    if request is None:
        return target.renderer.notice(
            f"⬆️ Pushed {checkout.branch} to {done.url}. This remote is on no forge the "
            f"bridge speaks: open the pull request from {checkout.branch} into "
            f"{checkout.base} there by hand."
        )
    said = "Opened" if done.opened else "Pushed; updated"
    return target.renderer.notice(f"🔀 {said} pull request #{request.number}: {request.url}")


async def _state(target: Target, draft: PullRequestRecord) -> list[Op]:
    if draft.number is None:
        return target.renderer.notice(
            "Nothing new to push: the remote has this branch as it is here."
        )
    request, checks = await work.state(target.projects, draft.number)
    shown = {"passing": "✅ passing", "failing": "❌ failing", "pending": "⏳ running"}
    lines = [f"🔀 Pull request #{request.number}: {request.state}", request.url]
    if request.state == "open":
        lines.append(f"checks: {shown.get(checks, 'none')}")
        if request.mergeable is False:
            lines.append("⚠️ it conflicts with its base branch")
    lines.append("Nothing new to push.")
    return target.renderer.notice("\n".join(lines))


def _refused(target: Target, exc: Exception) -> list[Op]:
    if isinstance(exc, work.Conflict):
        checkout = target.projects.checkout()
        base = checkout.base if checkout else "the base"
        question = f"⚠️ Not pushed: {exc}. Ask the agent to bring {base} in and resolve them?"
        # The files travel in the button's value, which stays with the bridge.
        asked = f"rebase\n{exc.commit}\n" + ", ".join(exc.files[:LISTED])
        return picker(target, REBASE, question, [asked, "cancel"], ["Ask the agent", "Not now"])
    if isinstance(exc, work.PushError):
        return target.renderer.notice(f"⚠️ {_CAUSES[exc.kind]}: {exc}")
    return target.renderer.notice(f"⚠️ {exc}")


async def rebase(target: Target, choice: str) -> list[Op]:
    """[Ask the agent] to resolve a conflict with the base, or [Not now]."""
    checkout = target.projects.checkout()
    word, _, rest = choice.partition("\n")
    commit, _, files = rest.partition("\n")
    if word != "rebase" or checkout is None:
        return target.renderer.notice("Left as it is. /pr again once the branch merges.")
    agent = await target.ensure_agent()
    asked = REBASE_PROMPT.format(base=checkout.base, commit=commit, files=files or "some files")
    await agent.prompt(asked)
    return target.renderer.notice("Asked the agent to bring in the base branch; /pr again after.")


# Every push and commit waits for a press by the owner or an approver (`guarded`).
COMMIT = Picker("pr_commit", committed, guarded=True)
OPEN = Picker("pr_open", opened, guarded=True)
REBASE = Picker("pr_rebase", rebase, guarded=True)

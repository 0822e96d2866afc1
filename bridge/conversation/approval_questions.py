"""One conversation's approval questions: the gate asks, the bridge decides, a person answers.

The approval gate (bridge/extensions/approval-gate.ts) asks about every tool call in
its scope with a `select` marked as its own (bridge/approvals/ask.py). The decision
is made here, where the grants are: a call the mode lets through, or one a grant
covers, is allowed at once and shows nothing; anything else becomes a question with
its context — the command and where it runs, or a diff preview (the whole diff
attached when the preview is cut) — and four answers: Allow once, Always allow (a
grant kept in the conversation's record, so it outlives agent and bridge restarts),
Deny, and Deny with reason (typed in a form where the platform has forms, otherwise
the gate asks for it as an input dialog).

With `notify_approvers = "dm"` each approver also gets the question in a direct
message. A copy mirrors every change of the question's message (`mirror`), so an
answer in either place shows in both, and a press on a copy is carried to this
conversation by the supervisor (`DialogRecord.copies`). While any question waits
the live status says "waiting for approval" and the run-time limit stops counting.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.approvals import (
    DEFAULT_PATTERNS,
    ApprovalAsk,
    cut,
    diff_preview,
    grant_for,
    granted,
    parse,
    reason_to_ask,
)
from bridge.conversation.plans import refusal
from bridge.files.posting import ExportRefused, read_inside
from bridge.model import Edit, Form, Mention, Send, Upload
from bridge.platform import DirectMessages, PlatformError
from bridge.render import DialogChoice
from bridge.render.textbits import clip, code_block, delay
from bridge.store.records import AuditEntry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.containment.hidden import Sight
    from bridge.conversation.agent_lifetime import AgentLife
    from bridge.conversation.dialogs import Dialogs
    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, Op, Sender
    from bridge.projects.project import Projects
    from bridge.render import Renderer
    from bridge.rpc.client import AgentClient
    from bridge.rpc.ui import SelectRequest
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

PREVIEW_CHARS = 1500  # of a diff in the question; a phone screen, and room for markup
MAX_READ = 2 * 2**20  # bytes of a file read for a preview
ARGS_CHARS = 600  # of another tool's arguments (mode "all")
GRANTED = "allowed by an earlier Always allow"
REASON_FORM = Form("Why not? Your answer goes to the agent.", multiline=True)


class ApprovalConversation(Protocol):
    """The conversation, as its approvals see it."""

    key: str
    chat: ChatRef
    life: AgentLife
    dialogs: Dialogs
    projects: Projects  # what the agent sees: the preview reads no more

    @property
    def renderer(self) -> Renderer: ...

    @property
    def record(self) -> ConversationRecord | None: ...

    def submit(self, ops: Sequence[Op]) -> None: ...

    async def save(self, **changes: object) -> None: ...


class Approvals:
    def __init__(self, conversation: ApprovalConversation, services: Services) -> None:
        self._conversation = conversation
        self.services = services
        self._asked: dict[str, ApprovalAsk] = {}  # request id → the call waiting
        self._copies: dict[str, dict[str, ChatRef]] = {}  # request id → approver → DM
        self._dms: dict[str, ChatRef | None] = {}  # approvers' direct chats, once found
        conversation.dialogs.on_settled = self.settled
        conversation.dialogs.on_closed = self.closed

    async def asked(self, agent: AgentClient, request: SelectRequest, now: float) -> bool:
        """The agent sent a `select`: False if it is not the gate's; else it is allowed
        at once, or shown as a question."""
        ask = parse(request.title)
        if ask is None:
            return False
        refused = refusal(self._conversation.record, ask)
        if refused is not None:  # a plan is being made: read-only (plans.py)
            await agent.answer_dialog(request.id, value=f"refuse:{refused}")
            self.services.stats.plans["refused"] += 1
            return True
        options = self.services.options.approvals
        patterns = DEFAULT_PATTERNS if options.patterns is None else options.patterns
        reason = reason_to_ask(ask, options.mode, patterns, str(agent.spec.cwd))
        if reason is None:  # the mode lets it through
            await agent.answer_dialog(request.id, value="allow")
            return True
        record = self._conversation.record
        grant = None if record is None else granted(ask, record.grants)
        if grant is not None:
            await agent.answer_dialog(request.id, value="allow")
            await self._granted(request, ask, grant.by)
            return True
        await self._question_shown(agent, request, ask, reason, now)
        return True

    async def settled(self, request_id: str, value: str | None, sender: Sender) -> str:
        """A question was answered (`value` as sent to the gate): an "always" becomes a
        grant; returns what was decided on, for the audit log ("" if not ours)."""
        ask = self._asked.pop(request_id, None)
        if ask is None:
            return ""
        record = self._conversation.record
        if value == "always" and record is not None and granted(ask, record.grants) is None:
            grant = grant_for(ask, sender.id, self.services.wall())
            if grant is not None:
                await self._conversation.save(grants=[*record.grants, grant])
        self._changed(self.services.clock())
        return subject(ask)

    def closed(self, request_id: str | None = None) -> None:
        """A question expired (or, with None, the agent went): nobody waits on it now."""
        if request_id is None:
            self._asked.clear()
        elif self._asked.pop(request_id, None) is None:
            return
        self._changed(self.services.clock())

    def mirror(self, ops: Sequence[Op]) -> None:
        """Every op of a question's message goes to its copies too; the copies are
        forgotten once the question is closed (its message edited without buttons)."""
        if not self._copies:  # the usual case, on every op of every conversation
            return
        for op in ops:
            if not isinstance(op, Send | Edit) or not op.slot.startswith("dialog:"):
                continue
            request_id = op.slot.removeprefix("dialog:")
            copies = self._copies.get(request_id, {})
            for approver, chat in copies.items():
                copy = dataclasses.replace(op, slot=f"{op.slot}>{approver}")
                if isinstance(copy, Send) and copy.ping is not None:
                    # The copy pings the approver it goes to, not the run's person.
                    copy = dataclasses.replace(copy, ping=Mention(approver))
                self.services.outbox.submit(self._conversation.key, chat, [copy])
            if isinstance(op, Edit) and not op.buttons:
                self._copies.pop(request_id, None)

    # --- parts ------------------------------------------------------------------------

    async def _granted(self, request: SelectRequest, ask: ApprovalAsk, by: str) -> None:
        """A person's earlier "Always allow" decided: the audit log says whose."""
        entry = AuditEntry(
            at=self.services.wall(),
            key=self._conversation.key,
            user_id=by,
            request_id=request.id,
            title=subject(ask),
            choice=GRANTED,
        )
        await self.services.store.audit(entry)

    async def _question_shown(
        self, agent: AgentClient, request: SelectRequest, ask: ApprovalAsk, reason: str, now: float
    ) -> None:
        """Ask a person: the question in this chat (and copies in the approvers' direct
        messages), the whole diff attached when its preview is cut."""
        conversation = self._conversation
        copies = await self._direct_chats()
        self._asked[request.id] = ask
        self._copies[request.id] = copies
        # File work (the preview reads the file an edit would change): off the loop.
        text, whole = await anyio.to_thread.run_sync(self._question, ask, reason, agent.spec.cwd)
        choices = self._choices(request.id)
        conversation.submit(
            conversation.renderer.questions.open_approval(request.id, text, choices)
        )
        if whole:
            name = f"{Path(ask.path).name or 'change'}.diff"
            upload = Upload(f"diff:{request.id}", name, whole.encode(), "the whole diff")
            if not conversation.life.hosting.posted(upload):  # not twice across a restart
                conversation.submit([upload])
        await conversation.dialogs.opened(request, now, [c.chat_id for c in copies.values()])
        self._changed(now)

    def _changed(self, now: float) -> None:
        self._conversation.submit(self._conversation.renderer.waiting(len(self._asked), now))
        self._conversation.life.waiting(len(self._asked), now)

    async def _direct_chats(self) -> dict[str, ChatRef]:
        """Approver → their direct chat, for the copies (none unless asked for)."""
        adapter = self.services.adapter
        if self.services.options.approvals.notify_approvers != "dm":
            return {}
        if not isinstance(adapter, DirectMessages):
            return {}
        chats: dict[str, ChatRef] = {}
        for approver in sorted(self._conversation.dialogs.approvers()):
            if approver not in self._dms:
                try:
                    self._dms[approver] = await adapter.direct_chat(approver)
                except PlatformError as exc:  # a group id, a user who never wrote to the bot
                    log.warning("no direct chat with approver %s: %s", approver, exc)
                    self._dms[approver] = None
            chat = self._dms[approver]
            # Where the conversation already is (an approver's own private chat), a
            # copy would only repeat the question.
            if chat is not None and chat.chat_id != self._conversation.chat.chat_id:
                chats[approver] = chat
        return chats

    def _question(self, ask: ApprovalAsk, reason: str, workspace: Path) -> tuple[str, str]:
        """The question's Markdown, and the whole diff when the preview was cut."""
        expires = f"⏳ answer within {delay(self.services.options.dialog_timeout)}"
        if ask.tool == "bash":
            where = f"in `{ask.cwd}`" if ask.cwd else ""
            head = f"✋ *Approve this command?* ({reason})"
            return "\n".join([head, code_block(ask.command), where, expires]), ""
        if ask.tool in ("edit", "write"):
            sight = self._conversation.projects.sight(workspace)
            diff = diff_preview(ask, lambda path: previewed(workspace, path, sight))
            shown, was_cut = cut(diff, PREVIEW_CHARS)
            lines = [f"✋ *Approve this {ask.tool}?* ({reason})", f"`{ask.path}`"]
            lines.append(code_block(shown or "(no change)", "diff"))
            if was_cut:
                lines.append("(cut here: the whole diff is attached)")
            if ask.truncated:
                lines.append("(the new content was too large to preview whole)")
            return "\n".join([*lines, expires]), diff if was_cut else ""
        args = clip(json.dumps(dict(ask.input), ensure_ascii=False, indent=1), ARGS_CHARS)
        head = f"✋ *Approve {ask.tool}?* ({reason})"
        return "\n".join([head, code_block(args, "json"), expires]), ""

    def _choices(self, request_id: str) -> list[tuple[str, DialogChoice]]:
        return [
            ("✅ Allow once", DialogChoice(request_id, "Allow once", value="allow")),
            ("♾ Always allow", DialogChoice(request_id, "Always allow", value="always")),
            ("⛔ Deny", DialogChoice(request_id, "Deny", value="deny")),
            (
                "💬 Deny with reason…",
                DialogChoice(
                    request_id,
                    "Deny with reason",
                    value="reason",
                    form=REASON_FORM,
                    typed_prefix="deny:",
                ),
            ),
        ]


def subject(ask: ApprovalAsk) -> str:
    """What a decision was about, in one line (the audit log's `title`)."""
    if ask.tool == "bash":
        return f"bash: {clip(' '.join(ask.command.split()), 300)}"
    if ask.path:
        return f"{ask.tool}: {ask.path}"
    return f"{ask.tool}: {clip(json.dumps(dict(ask.input), ensure_ascii=False), 300)}"


def previewed(workspace: Path, path: str, sight: Sight) -> str | None:
    """The text of the file an edit would change, if it is a small regular file inside
    `workspace` that the agent's `sight` shows (the bridge reads it with its own rights,
    outside the sandbox: never a file the agent could not show the chat itself, never
    a FIFO that would hang the read); None otherwise. The checks are /get's and
    /export's (`read_inside`)."""
    try:
        # Why a file is refused is not shown: its preview is left out, the question asked.
        refused = {"outside": "", "hidden": "", "what": ""}
        _, data = read_inside(Path(path), (workspace.resolve(),), MAX_READ, sight=sight, **refused)
        return data.decode("utf-8")
    except (ExportRefused, UnicodeDecodeError):
        return None

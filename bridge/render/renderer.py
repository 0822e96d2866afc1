"""The renderer: one conversation's agent events in, chat view ops out.

A pure state machine: no I/O, no clock of its own (`now` comes with every call),
no asyncio. `apply` takes every decoded agent event and client signal; `tick`
releases changes held back by pacing. The parts live in their own modules:
live status (status.py), assistant text (text.py), tools (tools.py), dialogs, the
busy question and pickers (dialogs.py), notices (notices.py), queued messages (queued.py).

Slots: ``status:<run>``, ``text:<run>:<msg>:<chunk>`` (``-`` for the run outside
a run), ``tool:<toolCallId>``, ``tools:<run>`` (compact), ``toolfile:<id>``,
``dialog:<request id>``, ``reply:<request id>`` (an input dialog's ForceReply
message), ``busy:<pending id>``, ``picker:<fresh id>``, ``notice:…``, ``compaction:…``
(notices.py; ``crashed:<message id>``: the supervisor's, status.py; ``queue…``: queued.py).
Run numbers count from 1 per renderer: the outbox maps slots per conversation
and per renderer's lifetime. `working_on(message_id)` marks the user's message
that a prompt came from (`React` "working"); the run that prompt starts marks it
done or failed when it ends, or failed if the agent dies or the prompt never
starts a run. `joined(message_id)` does the same for a message steered or queued
into the run.
Invariants: nothing raises on odd input (missing fields, ids never started,
events outside a run); after `interrupt` no button of this renderer resolves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.identity import fresh_id
from bridge.model import ConversationSettings, React
from bridge.render.choices import TokenBook
from bridge.render.dialogs import Questions
from bridge.render.notices import Notices
from bridge.render.queued import QueueView
from bridge.render.riders import Riders
from bridge.render.status import Board, Numbering, RunStatus
from bridge.render.text import AssistantText
from bridge.render.textbits import clip
from bridge.render.tools import Tools, summarize
from bridge.render.views import Context, in_run
from bridge.rpc import events as ev
from bridge.rpc import signals as sig
from bridge.rpc import ui
from bridge.rpc.content import AssistantMessage, UserMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Op, PlatformLimits
    from bridge.platform import Formatter
    from bridge.render.choices import Choice, DialogChoice, PickerOption
    from bridge.rpc.agent_event import AgentEvent

EXPIRED = "⌛ expired — the agent went on without an answer"
_DEFAULT_SETTINGS = ConversationSettings()
# Events of the agent loop: a run that saw none was an extension command or a failed prompt.
_LOOP: tuple[type, ...] = (ev.AgentStart, ev.TurnStart, ev.TurnEnd, ev.MessageStart)
_LOOP += (ev.MessageUpdate, ev.MessageEnd, ev.ToolExecutionStart, ev.ToolExecutionUpdate)
_LOOP += (ev.ToolExecutionEnd,)


class Renderer:
    def __init__(
        self,
        *,
        limits: PlatformLimits,
        formatter: Formatter,
        tokens: Callable[[], str],
        settings: ConversationSettings = _DEFAULT_SETTINGS,
        tool_output_lines: int = 12,
    ) -> None:
        self.settings = settings
        self._ctx = Context(limits, formatter, TokenBook(tokens, limits.max_button_data))
        self._board = Board()
        self._tools = Tools(self._ctx, tool_output_lines)
        self.questions = Questions(self._ctx)
        self._notices = Notices(self._ctx, lambda: self.counts.note(self._run is not None))
        self._run: RunStatus | None = None
        self._cut: RunStatus | None = None  # ended without agent_end: the agent died
        self.counts = Numbering()  # runs and messages so far: they name their slots
        self._text: AssistantText | None = None
        self._loose_scope: str | None = None  # compact tool list outside any run
        self._reacting: str | None = None  # the user's message of a prompt not yet running
        self._riders = Riders()  # the user's messages steered or queued into the run
        self.queued = QueueView(self._ctx, self._riders)  # and the buttons of those waiting
        self._now = 0.0

    # --- the public surface -------------------------------------------------------------

    def apply(self, event: AgentEvent, now: float) -> list[Op]:
        self._now = now
        run = self._run
        if run is not None and isinstance(event, _LOOP):
            run.loop_seen = run.loop_open = True
        return self._dispatch(event, now)

    def tick(self, now: float) -> list[Op]:
        self._now = now
        ops = self._run.refresh(self._board, now) if self._run is not None else []
        if self._text is not None:
            ops += self._text.flush(now)
        return ops + self._tools.flush(now)

    def pressed(self, token: str) -> Choice | None:
        return self._ctx.book.lookup(token)

    def dialog_tokens(self, request_id: str) -> list[tuple[str, DialogChoice]]:
        return self.questions.dialog_tokens(request_id)

    def dialog_slot(self, request_id: str) -> str | None:
        return self.questions.dialog_slot(request_id)

    def ask_reply(self, request_id: str, sender_id: str) -> list[Op]:
        return self.questions.ask_reply(request_id, sender_id)

    def reply_targets(self) -> dict[str, str]:
        return self.questions.reply_targets()

    def awaiting_answers(self) -> dict[str, str]:
        return self.questions.awaiting()

    def close_dialog(self, request_id: str, outcome: str) -> list[Op]:
        return self.questions.close(f"dialog:{request_id}", outcome)

    def ask_busy(self, pending_id: str, preview: str) -> list[Op]:
        return self.questions.ask_busy(pending_id, preview)

    def close_busy(self, pending_id: str, outcome: str) -> list[Op]:
        return self.questions.close(f"busy:{pending_id}", outcome)

    def pick(self, kind: str, title: str, options: list[PickerOption], per_row: int) -> list[Op]:
        """A picker: a button per option; a press resolves to a `PickerChoice`."""
        return self.questions.pick(fresh_id(), kind, title, options, per_row)

    def close_picker(self, picker_id: str, outcome: str) -> list[Op]:
        return self.questions.close(f"picker:{picker_id}", outcome)

    def has_questions(self) -> bool:
        """Whether a dialog or busy question of this renderer still has live buttons."""
        return self.questions.any_open()

    def close_questions(self, outcome: str) -> list[Op]:
        """Close every open question with `outcome` and retire its buttons."""
        return self.questions.close_all(outcome)

    def notice(self, text: str, *, markdown: bool = False) -> list[Op]:
        return self._notices.notice(text, markdown=markdown)

    def working_on(self, message_id: str | None) -> list[Op]:
        """A prompt from the user's message `message_id` is being sent to the agent."""
        ops = self._prompt_failed()
        self._reacting = message_id
        return ops + ([React(message_id, "working")] if message_id else [])

    def not_started(self) -> list[Op]:
        """The prompt of `working_on` failed before its run started."""
        ops = self._prompt_failed()
        return ops + (self._riders.fail_all() if self._run is None else [])

    def _prompt_failed(self) -> list[Op]:
        message, self._reacting = self._reacting, None
        return [React(message, "failed")] if message else []

    def joined(self, message_id: str | None, text: str) -> list[Op]:
        """`message_id` (`text`) went into the live run as a steer or follow-up (riders.py)."""
        return self._riders.join(message_id, text) if message_id is not None else []

    def waiting(self, approvals: int, now: float) -> list[Op]:
        """`approvals` questions wait for a person: the live status says so."""
        self._board.approvals = approvals
        return self._run.refresh(self._board, now, force=True) if self._run is not None else []

    def changed(self, files: int) -> None:
        """The run about to end changed `files` files of its worktree."""
        if self._run is not None:
            self._run.changed = files

    def overtime(self) -> None:
        """The bridge aborts the run for running too long: it ends as failed."""
        if self._run is not None:
            self._run.overtime = True

    def interrupt(self, reason: str) -> list[Op]:
        """The bridge stops or the agent died: finish what is live, retire every button."""
        now = self._now
        ops = self._finish_text(now) + self._tools.cut(now, "interrupted", self._scope())
        ops += self.not_started()
        run, self._run = self._run, None
        if run is not None:
            self._forget_run(run)
            ops += in_run(run.interrupted(now, reason), run.name, over=True)
            ops += [React(run.message, "failed")] if run.message else []
            ops += self._riders.fail_all()
        elif self._cut is not None:
            ops += self._cut.interrupted(now, reason)
        self._cut = None
        ops += self.questions.close_all(f"✖ {reason}" if reason else "✖ no longer active")
        for owner in self._ctx.book.owners():
            self._ctx.book.retire(owner)
        return ops

    # --- runs ---------------------------------------------------------------------------

    def _dispatch(self, event: AgentEvent, now: float) -> list[Op]:
        # One style of dispatch for agent events: a `match` on the typed union (rpc/state.py),
        # by family: the client's signals, the agent's questions and UI, its run, the rest.
        if isinstance(event, sig.Signal):
            return self._on_signal(event, now)
        if isinstance(event, ui.UIRequest):
            return self._on_ui(event, now)
        ops = self._on_run_event(event, now)
        return ops if ops is not None else self._on_other_event(event, now)

    def _on_signal(self, event: sig.Signal, now: float) -> list[Op]:
        match event:
            case sig.RunStarted():
                return self._run_started(event, now)
            case sig.RunEnded():
                return self._close_run(now) if self._run is not None else self._finish_text(now)
            case sig.DialogExpired(cancelled=True):  # the bridge's deadline: the agent waited
                outcome = f"⌛ No answer in {event.waited / 60:g} min — cancelled."
                return self.close_dialog(event.dialog.request.id, outcome)
            case sig.DialogExpired():
                return self.close_dialog(event.dialog.request.id, EXPIRED)
            case sig.AgentGone():
                return self._agent_gone(event, now)
            case _:
                return []

    def _on_ui(self, event: ui.UIRequest, now: float) -> list[Op]:
        if ui.is_dialog(event):
            return self.questions.open_dialog(event)
        match event:
            case ui.NotifyRequest():
                return self._notices.notify(event.message, event.notifyType)
            case ui.SetStatusRequest():
                self._board.set_status(event.statusKey, event.statusText)
                return self._touch(now)
            case ui.SetWidgetRequest():
                self._board.set_widget(event.widgetKey, event.widgetLines)
                return self._touch(now)
            case ui.SetEditorTextRequest():
                return self._notices.editor_text(event.text)
            case _:
                return []

    def _on_run_event(self, event: AgentEvent, now: float) -> list[Op] | None:
        """The run's own events: its loop, its messages, its tools (None: not one)."""
        match event:
            case ev.AgentStart() if self._run is not None:
                self._run.retry = None  # the attempt the retry line announced is running
                return self._touch(now)
            case ev.AgentEnd() | ev.AgentSettled():
                return self._agent_end(event, now)
            case ev.MessageStart():
                return self._message_start(event, now)
            case ev.MessageUpdate():
                return (self._text or self._new_text()).update(event, now)
            case ev.MessageEnd():
                return self._message_end(event, now)
            case ev.ToolExecutionStart():
                return self._tool_start(event, now)
            case ev.ToolExecutionUpdate():
                return self._tools.update(event, now, self.settings.verbosity, self._scope())
            case ev.ToolExecutionEnd():
                return self._tool_end(event, now)
            case _:
                return None

    def _on_other_event(self, event: AgentEvent, now: float) -> list[Op]:
        """Around the run: the queue, compaction, retries, errors."""
        match event:
            case ev.QueueUpdate():
                self._board.steering = len(event.steering)
                self._board.follow_ups = len(event.followUp)
                self._riders.queued(event.followUp)
                return self._touch(now)
            case ev.CompactionStart():
                return self._compaction_start(event, now)
            case ev.CompactionEnd():
                return self._compaction_end(event, now)
            case ev.LegacyCompaction(auto=True):
                return self._notices.notice("🗜 context compacted", agent=True)
            case ev.AutoRetryStart() if self._run is not None:
                run = self._run
                run.retrying(event.attempt, event.maxAttempts, event.delayMs, event.errorMessage)
                return self._touch(now)
            case ev.AutoRetryEnd() if self._run is not None:
                self._run.retry = None
                return self._touch(now)
            case ev.ExtensionError():
                return self._notices.extension_error(event)
            case ev.ErrorEvent():
                return self._notices.error(event.error)
            case _:
                return []

    def _run_started(self, _: sig.RunStarted, now: float) -> list[Op]:
        if self._run is not None:
            return []  # a repeated signal: a new run always follows a RunEnded
        self._end_loose_scope()
        self._cut = None
        self.counts.runs += 1
        self._run = RunStatus.begin(self.counts.runs, self.counts.run_began(now), self._ctx.book)
        self._tools.run = self._run.name
        self._run.message, self._reacting = self._reacting, None
        return self._run.opening(now)

    def _close_run(self, now: float) -> list[Op]:
        run = self._run
        assert run is not None
        ops = self._finish_text(now) + self._tools.cut(now, "cut off", self._scope())
        self._run = None
        self._forget_run(run)
        if run.message:
            ops.append(React(run.message, run.reaction()))
        marks, lost = self._riders.end(run.reaction())
        ops += marks
        for text in lost:
            quoted = clip(text, 200) or "a picture"
            ops += self._notices.notice(f"⚠️ Not delivered to the agent: “{quoted}”")
        if not run.loop_seen:
            return ops + run.slot.remove()  # nothing ran: the command's answer says it all
        if run.loop_open:
            self._cut = run
        return ops + in_run(run.finish(now), run.name, over=True)

    def _forget_run(self, run: RunStatus) -> None:
        self._tools.run = ""
        self._ctx.book.retire(run.owner)
        self._tools.end_scope(str(run.number))

    def _agent_gone(self, event: sig.AgentGone, _: float) -> list[Op]:
        code = event.returncode
        reason = "agent stopped" + (f" (exit {code})" if code is not None else "")
        self._board = Board()  # the next agent sets its extension lines anew
        return self.interrupt(reason)

    def _agent_end(self, event: ev.AgentEnd | ev.AgentSettled, _: float) -> list[Op]:
        if self._run is not None:
            self._run.loop_ended(event.messages if isinstance(event, ev.AgentEnd) else [])
        return []

    def _touch(self, now: float) -> list[Op]:
        return self._run.refresh(self._board, now) if self._run is not None else []

    # --- assistant text -------------------------------------------------------------------

    def _new_text(self) -> AssistantText:
        self.counts.messages += 1
        live = self._run
        run = str(live.number) if live is not None else "-"
        name = live.name if live is not None else ""
        self._text = AssistantText(self._ctx, f"text:{run}:{self.counts.messages}", name)
        return self._text

    def _finish_text(self, now: float) -> list[Op]:
        text, self._text = self._text, None
        return text.finish(None, now) if text is not None else []

    def _message_start(self, event: ev.MessageStart, now: float) -> list[Op]:
        if isinstance(event.message, UserMessage):
            self._riders.heard(event.message)
        if not isinstance(event.message, AssistantMessage):
            return []
        ops = self._finish_text(now)
        self._new_text()
        return ops

    def _message_end(self, event: ev.MessageEnd, now: float) -> list[Op]:
        message = event.message
        if not isinstance(message, AssistantMessage):
            return []
        text, self._text = self._text or self._new_text(), None
        ops = text.finish(message, now)
        if self._run is not None:
            self._run.note_assistant(message)
        elif message.stopReason == "error":
            ops += self._notices.error(message.errorMessage or "the model call failed")
        return ops

    # --- tools -------------------------------------------------------------------------------

    def _scope(self) -> str:
        if self._run is not None:
            return str(self._run.number)
        if self._loose_scope is None:
            self._loose_scope = f"n{self.counts.note(False)}"  # named as a replay does
        return self._loose_scope

    def _end_loose_scope(self) -> None:
        if self._loose_scope is not None:
            self._tools.end_scope(self._loose_scope)
            self._loose_scope = None

    def _tool_start(self, event: ev.ToolExecutionStart, now: float) -> list[Op]:
        ops = self._tools.start(event, now, self.settings.verbosity, self._scope())
        if self._run is not None:
            self._run.tools += 1
            label = f"{event.toolName} {summarize(event.toolName, event.args)}"
            self._run.running[event.toolCallId] = clip(label.strip(), 80)
        return ops + self._touch(now)

    def _tool_end(self, event: ev.ToolExecutionEnd, now: float) -> list[Op]:
        ops = self._tools.end(event, now, self.settings.verbosity, self._scope())
        if self._run is not None:
            self._run.running.pop(event.toolCallId, None)
        return ops + self._touch(now)

    # --- status lines: compaction ----------------------------------

    def _compaction_start(self, event: ev.CompactionStart, now: float) -> list[Op]:
        if self._run is not None:
            self._run.compacting = True
            return self._touch(now)
        # A manual compaction is announced by the command that asked for it.
        return [] if event.reason == "manual" else self._notices.compaction_started()

    def _compaction_end(self, event: ev.CompactionEnd, now: float) -> list[Op]:
        ops: list[Op] = []
        if self._run is not None:
            self._run.compacting = False
            ops = self._touch(now)
        if event.reason != "manual":
            ops += self._notices.compaction_ended(event)
        return ops

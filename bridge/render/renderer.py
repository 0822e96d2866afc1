"""The renderer: one conversation's agent events in, chat view ops out.

A pure state machine: no I/O, no clock of its own (`now` comes with every call),
no asyncio. `apply` takes every decoded agent event and client signal; `tick`
releases changes held back by pacing. The parts live in their own modules:
the runs, fed the agent's events (runs.py: live status, status.py; assistant text,
text.py; tools, tools.py), dialogs, the busy question and pickers (dialogs.py),
notices (notices.py), queued messages (queued.py).

Slots: ``status:<run>``, ``text:<run>:<msg>:<chunk>`` (``-`` for the run outside
a run), ``tool:<toolCallId>``, ``tools:<run>`` (compact), ``toolfile:<id>``,
``dialog:<request id>``, ``reply:<request id>`` (an input dialog's ForceReply
message), ``busy:<pending id>``, ``picker:<fresh id>``, ``notice:…``, ``compaction:…``
(notices.py; ``crashed:<message id>``: the supervisor's, status.py; ``queue…``: queued.py;
``ping:<run>``: the end of a run, pinging its person, pings.py).
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
from bridge.model import ConversationSettings, NotifySettings
from bridge.render.choices import TokenBook
from bridge.render.dialogs import Questions
from bridge.render.notices import Notices
from bridge.render.queued import QueueView
from bridge.render.runs import Runs
from bridge.render.status import Board
from bridge.render.tools import Tools
from bridge.render.views import Context
from bridge.rpc import events as ev
from bridge.rpc import signals as sig
from bridge.rpc import ui

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Mention, Op, PlatformLimits
    from bridge.platform import Formatter
    from bridge.render.choices import Choice, DialogChoice, PickerOption
    from bridge.render.status import Numbering
    from bridge.render.usage import ContextUse
    from bridge.rpc.agent_event import AgentEvent

EXPIRED = "⌛ expired — the agent went on without an answer"
_DEFAULT_SETTINGS = ConversationSettings()
_DEFAULT_NOTIFY = NotifySettings()
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
        notify: NotifySettings = _DEFAULT_NOTIFY,
    ) -> None:
        self.settings = settings
        book = TokenBook(tokens, limits.max_button_data)
        self._ctx = Context(limits, formatter, book, notify)
        tools = Tools(self._ctx, tool_output_lines)
        self.questions = Questions(self._ctx)
        self._notices = Notices(self._ctx, lambda: self.counts.note(self._runs.run is not None))
        self._runs = Runs(self._ctx, tools, self._notices)
        # The buttons of the user's messages waiting for the run (riders.py: those in it).
        self.queued = QueueView(self._ctx, self._runs.riders)
        self._now = 0.0

    @property
    def counts(self) -> Numbering:
        """Runs and messages so far: they name their slots (set back by a replay)."""
        return self._runs.counts

    @counts.setter
    def counts(self, counts: Numbering) -> None:
        self._runs.counts = counts

    # --- the public surface -------------------------------------------------------------

    def apply(self, event: AgentEvent, now: float) -> list[Op]:
        self._now = now
        run = self._runs.run
        if run is not None and isinstance(event, _LOOP):
            run.loop_seen = run.loop_open = True
        return self._dispatch(event, now)

    def tick(self, now: float, *, force: bool = False) -> list[Op]:
        """Changes held back by pacing, once due (`force`: all of them now; a replay
        that caught up shows where it got to, bridge/conversation/hosts.py)."""
        self._now = now
        return self._runs.tick(now, force=force)

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

    @property
    def live_run(self) -> str:
        """The `Send.run` of the run on now ("" for none): a plan's step cards join its
        stream (bridge/conversation/plans.py)."""
        run = self._runs.run
        return run.name if run is not None else ""

    def has_questions(self) -> bool:
        """Whether a dialog or busy question of this renderer still has live buttons."""
        return self.questions.any_open()

    def close_questions(self, outcome: str) -> list[Op]:
        """Close every open question with `outcome` and retire its buttons."""
        return self.questions.close_all(outcome)

    def notice(self, text: str, *, markdown: bool = False) -> list[Op]:
        return self._notices.notice(text, markdown=markdown)

    def working_on(self, message_id: str | None, person: Mention | None = None) -> list[Op]:
        """A prompt from the user's message `message_id` is being sent to the agent, by
        `person`: whom the questions and the end of the run it starts ping (pings.py)."""
        if person is not None:
            self._ctx.person = person
        return self._runs.working_on(message_id)

    def not_started(self) -> list[Op]:
        """The prompt of `working_on` failed before its run started."""
        return self._runs.not_started()

    def joined(self, message_id: str | None, text: str) -> list[Op]:
        """`message_id` (`text`) went into the live run as a steer or follow-up (riders.py)."""
        return self._runs.joined(message_id, text)

    def waiting(self, approvals: int, now: float) -> list[Op]:
        """`approvals` questions wait for a person: the live status says so."""
        return self._runs.waiting(approvals, now)

    def changed(self, files: int) -> None:
        """The run about to end changed `files` files of its worktree."""
        self._runs.changed(files)

    def context_used(self, use: ContextUse | None) -> None:
        """The context in use as the run about to end ends: its final line shows it."""
        self._runs.context_used(use)

    def overtime(self) -> None:
        """The bridge aborts the run for running too long: it ends as failed."""
        self._runs.overtime()

    def interrupt(self, reason: str) -> list[Op]:
        """The bridge stops or the agent died: finish what is live, retire every button."""
        ops = self._runs.interrupt(self._now, reason)
        ops += self.questions.close_all(f"✖ {reason}" if reason else "✖ no longer active")
        for owner in self._ctx.book.owners():
            self._ctx.book.retire(owner)
        return ops

    # --- events, by family ---------------------------------------------------------------

    def _dispatch(self, event: AgentEvent, now: float) -> list[Op]:
        # One style of dispatch for agent events: a `match` on the typed union (rpc/state.py),
        # by family: the client's signals, the agent's questions and UI, its run, the rest.
        if isinstance(event, sig.Signal):
            return self._on_signal(event, now)
        if isinstance(event, ui.UIRequest):
            return self._on_ui(event, now)
        return self._runs.on_event(event, now, self.settings.verbosity)

    def _on_signal(self, event: sig.Signal, now: float) -> list[Op]:
        match event:
            case sig.RunStarted():
                return self._runs.started(now)
            case sig.RunEnded():
                return self._runs.ended(now)
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
                self._runs.board.set_status(event.statusKey, event.statusText)
                return self._runs.touch(now)
            case ui.SetWidgetRequest():
                self._runs.board.set_widget(event.widgetKey, event.widgetLines)
                return self._runs.touch(now)
            case ui.SetEditorTextRequest():
                return self._notices.editor_text(event.text)
            case _:
                return []

    def _agent_gone(self, event: sig.AgentGone, _: float) -> list[Op]:
        code = event.returncode
        reason = "agent stopped" + (f" (exit {code})" if code is not None else "")
        self._runs.board = Board()  # the next agent sets its extension lines anew
        return self.interrupt(reason)

"""The renderer's runs: the live one and what streams in it, from the agent's events.

Part of the renderer (renderer.py hands it every agent event that is neither a
client signal nor a UI request): the run's live status (status.py) and the board
it shows, the assistant's text (text.py), its tools (tools.py), and the reactions
on the user's messages the run works on (its prompt's, and riders.py's). A run
opens on `started` and closes on `ended`; one that closed while the agent's loop
was still open (the agent died) is kept as the cut run, so an interruption can
still say so on its status. Pure like the renderer: `now` comes with every call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.model import React
from bridge.render.pings import end_ping
from bridge.render.riders import Riders
from bridge.render.status import Board, Numbering, RunStatus
from bridge.render.text import AssistantText
from bridge.render.textbits import clip
from bridge.render.tools import summarize
from bridge.render.views import in_run
from bridge.rpc import events as ev
from bridge.rpc.content import AssistantMessage, UserMessage

if TYPE_CHECKING:
    from bridge.model import Op, Verbosity
    from bridge.render.notices import Notices
    from bridge.render.tools import Tools
    from bridge.render.usage import ContextUse
    from bridge.render.views import Context
    from bridge.rpc.agent_event import AgentEvent


class Runs:
    def __init__(self, ctx: Context, tools: Tools, notices: Notices) -> None:
        self._ctx = ctx
        self.board = Board()
        self._tools = tools
        self._notices = notices
        self.run: RunStatus | None = None
        self._cut: RunStatus | None = None  # ended without agent_end: the agent died
        self.counts = Numbering()  # runs and messages so far: they name their slots
        self._text: AssistantText | None = None
        self._loose_scope: str | None = None  # compact tool list outside any run
        self._reacting: str | None = None  # the user's message of a prompt not yet running
        self.riders = Riders()  # the user's messages steered or queued into the run

    def tick(self, now: float, *, force: bool = False) -> list[Op]:
        ops = self.run.refresh(self.board, now, force=force) if self.run is not None else []
        if self._text is not None:
            ops += self._text.flush(now, force=force)
        return ops + self._tools.flush(now, force=force)

    # --- the user's messages -------------------------------------------------------------

    def working_on(self, message_id: str | None) -> list[Op]:
        ops = self._prompt_failed()
        self._reacting = message_id
        return ops + ([React(message_id, "working")] if message_id else [])

    def not_started(self) -> list[Op]:
        ops = self._prompt_failed()
        return ops + (self.riders.fail_all() if self.run is None else [])

    def _prompt_failed(self) -> list[Op]:
        message, self._reacting = self._reacting, None
        return [React(message, "failed")] if message else []

    def joined(self, message_id: str | None, text: str) -> list[Op]:
        return self.riders.join(message_id, text) if message_id is not None else []

    # --- the live run ----------------------------------------------------------------------

    def waiting(self, approvals: int, now: float) -> list[Op]:
        self.board.approvals = approvals
        return self.run.refresh(self.board, now, force=True) if self.run is not None else []

    def changed(self, files: int) -> None:
        if self.run is not None:
            self.run.changed = files

    def overtime(self) -> None:
        if self.run is not None:
            self.run.overtime = True

    def interrupt(self, now: float, reason: str) -> list[Op]:
        """Finish what is live of the run, or say so on the cut run's status."""
        ops = self._finish_text(now) + self._tools.cut(now, "interrupted", self._scope())
        ops += self.not_started()
        run, self.run = self.run, None
        if run is not None:
            self._forget_run(run)
            ops += in_run(run.interrupted(now, reason), run.name, over=True)
            ops += self._end_ping(run, now)
            ops += [React(run.message, "failed")] if run.message else []
            ops += self.riders.fail_all()
        elif self._cut is not None:
            ops += self._cut.interrupted(now, reason)
        self._cut = None
        return ops

    def on_event(self, event: AgentEvent, now: float, verbosity: Verbosity) -> list[Op]:
        ops = self._on_run_event(event, now, verbosity)
        return ops if ops is not None else self._on_other_event(event, now)

    def _on_run_event(self, event: AgentEvent, now: float, verbosity: Verbosity) -> list[Op] | None:
        """The run's own events: its loop, its messages, its tools (None: not one)."""
        match event:
            case ev.AgentStart() if self.run is not None:
                self.run.retry = None  # the attempt the retry line announced is running
                return self.touch(now)
            case ev.AgentEnd() | ev.AgentSettled():
                return self._agent_end(event, now)
            case ev.MessageStart():
                return self._message_start(event, now)
            case ev.MessageUpdate():
                return (self._text or self._new_text()).update(event, now)
            case ev.MessageEnd():
                return self._message_end(event, now)
            case ev.ToolExecutionStart():
                return self._tool_start(event, now, verbosity)
            case ev.ToolExecutionUpdate():
                return self._tools.update(event, now, verbosity, self._scope())
            case ev.ToolExecutionEnd():
                return self._tool_end(event, now, verbosity)
            case _:
                return None

    def _on_other_event(self, event: AgentEvent, now: float) -> list[Op]:
        """Around the run: the queue, compaction, retries, errors."""
        match event:
            case ev.QueueUpdate():
                self.board.steering = len(event.steering)
                self.board.follow_ups = len(event.followUp)
                self.riders.queued(event.followUp)
                return self.touch(now)
            case ev.CompactionStart():
                return self._compaction_start(event, now)
            case ev.CompactionEnd():
                return self._compaction_end(event, now)
            case ev.LegacyCompaction(auto=True):
                return self._notices.notice("🗜 context compacted", agent=True)
            case ev.AutoRetryStart() if self.run is not None:
                run = self.run
                run.retrying(event.attempt, event.maxAttempts, event.delayMs, event.errorMessage)
                return self.touch(now)
            case ev.AutoRetryEnd() if self.run is not None:
                self.run.retry = None
                return self.touch(now)
            case ev.ExtensionError():
                return self._notices.extension_error(event)
            case ev.ErrorEvent():
                return self._notices.error(event.error)
            case _:
                return []

    def started(self, now: float) -> list[Op]:
        if self.run is not None:
            return []  # a repeated signal: a new run always follows a RunEnded
        self._end_loose_scope()
        self._cut = None
        self.counts.runs += 1
        self.run = RunStatus.begin(self.counts.runs, self.counts.run_began(now), self._ctx.book)
        self._tools.run = self.run.name
        self.run.message, self._reacting = self._reacting, None
        self.run.person = self._ctx.person
        return self.run.opening(now)

    def ended(self, now: float) -> list[Op]:
        return self._close_run(now) if self.run is not None else self._finish_text(now)

    def _close_run(self, now: float) -> list[Op]:
        run = self.run
        assert run is not None
        ops = self._finish_text(now) + self._tools.cut(now, "cut off", self._scope())
        self.run = None
        self._forget_run(run)
        if run.message:
            ops.append(React(run.message, run.reaction()))
        marks, lost = self.riders.end(run.reaction())
        ops += marks
        for text in lost:
            quoted = clip(text, 200) or "a picture"
            ops += self._notices.notice(f"⚠️ Not delivered to the agent: “{quoted}”")
        if not run.loop_seen:
            return ops + run.slot.remove()  # nothing ran: the command's answer says it all
        if run.loop_open:
            self._cut = run
        return ops + in_run(run.finish(now), run.name, over=True) + self._end_ping(run, now)

    def _end_ping(self, run: RunStatus, now: float) -> list[Op]:
        outcome = run.final or run.outcome(now)
        took = now - run.started
        ctx = self._ctx
        last = run.last
        return end_ping(
            ctx.notify, run.person, run=run.number, took=took, outcome=outcome, last=last
        )

    def _forget_run(self, run: RunStatus) -> None:
        self._tools.run = ""
        self._ctx.book.retire(run.owner)
        self._tools.end_scope(str(run.number))

    def _agent_end(self, event: ev.AgentEnd | ev.AgentSettled, _: float) -> list[Op]:
        if self.run is not None:
            self.run.loop_ended(event.messages if isinstance(event, ev.AgentEnd) else [])
            if isinstance(event, ev.AgentSettled) and event.aborted is not None:
                self.run.stopped = event.aborted
        return []

    def context_used(self, use: ContextUse | None) -> None:
        """The context in use as the live run ends: its final line shows the share."""
        if self.run is not None:
            self.run.context = use

    def touch(self, now: float) -> list[Op]:
        return self.run.refresh(self.board, now) if self.run is not None else []

    # --- assistant text -------------------------------------------------------------------

    def _new_text(self) -> AssistantText:
        self.counts.messages += 1
        live = self.run
        run = str(live.number) if live is not None else "-"
        name = live.name if live is not None else ""
        self._text = AssistantText(self._ctx, f"text:{run}:{self.counts.messages}", name)
        return self._text

    def _finish_text(self, now: float) -> list[Op]:
        text, self._text = self._text, None
        return text.finish(None, now) if text is not None else []

    def _message_start(self, event: ev.MessageStart, now: float) -> list[Op]:
        if isinstance(event.message, UserMessage):
            self.riders.heard(event.message)
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
        if self.run is not None:
            self.run.note_assistant(message)
        elif message.stopReason == "error":
            ops += self._notices.error(message.errorMessage or "the model call failed")
        return ops

    # --- tools -------------------------------------------------------------------------------

    def _scope(self) -> str:
        if self.run is not None:
            return str(self.run.number)
        if self._loose_scope is None:
            self._loose_scope = f"n{self.counts.note(False)}"  # named as a replay does
        return self._loose_scope

    def _end_loose_scope(self) -> None:
        if self._loose_scope is not None:
            self._tools.end_scope(self._loose_scope)
            self._loose_scope = None

    def _tool_start(self, event: ev.ToolExecutionStart, now: float, mode: Verbosity) -> list[Op]:
        ops = self._tools.start(event, now, mode, self._scope())
        if event.parentToolCallId:
            return ops  # shown inside its root; the status counts the model's calls only
        if self.run is not None:
            self.run.tools += 1
            label = f"{event.toolName} {summarize(event.toolName, event.args)}"
            self.run.running[event.toolCallId] = clip(label.strip(), 80)
        return ops + self.touch(now)

    def _tool_end(self, event: ev.ToolExecutionEnd, now: float, mode: Verbosity) -> list[Op]:
        ops = self._tools.end(event, now, mode, self._scope())
        if event.parentToolCallId:
            return ops
        if self.run is not None:
            self.run.running.pop(event.toolCallId, None)
        return ops + self.touch(now)

    # --- status lines: compaction ----------------------------------

    def _compaction_start(self, event: ev.CompactionStart, now: float) -> list[Op]:
        if self.run is not None:
            self.run.compacting = True
            return self.touch(now)
        # A manual compaction is announced by the command that asked for it.
        return [] if event.reason == "manual" else self._notices.compaction_started()

    def _compaction_end(self, event: ev.CompactionEnd, now: float) -> list[Op]:
        ops: list[Op] = []
        if self.run is not None:
            self.run.compacting = False
            ops = self.touch(now)
        if event.reason != "manual":
            ops += self._notices.compaction_ended(event)
        return ops

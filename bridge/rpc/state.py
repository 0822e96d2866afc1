"""What one agent is doing, derived from the events it sent (pure, no I/O).

`RunState.apply(event, now)` folds one event in and returns a `RunChange` when a
run starts or ends. The rules (docs/rpc.md, "Rules the code follows"):
- a run starts on `agent_start`, on a successful `prompt` response (atomic can
  lose the first `agent_start`) or on any in-run event while idle;
- `agent_end` is not the end: on a transient error it is followed by
  `auto_retry_start` and a new `agent_start`. A run is over on `agent_settled`
  (profiles that have it), on `agent_end` with `willRetry: false`, or on an
  `agent_end` that did not end in an error. An `agent_end` after an error with
  no `willRetry` leaves the state SETTLING: the caller waits a short grace
  (`settle()`) for an `auto_retry_start` that may follow;
- tools in flight are keyed by `toolCallId`; dialogs by request id, with the
  deadline of their own `timeout`, after which the agent has resolved them
  silently.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bridge.rpc.content import AssistantMessage
from bridge.rpc.events import (
    AgentEnd,
    AgentSettled,
    AgentStart,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    LegacyCompaction,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    QueueUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from bridge.rpc.profile import PI, Profile
from bridge.rpc.ui import is_dialog

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.rpc.ui import DialogRequest


class Phase(enum.Enum):
    IDLE = "idle"
    STARTING = "starting"  # prompt written, no answer yet: already busy for routing
    RUNNING = "running"
    RETRYING = "retrying"  # between a failed attempt and the next agent_start
    SETTLING = "settling"  # agent_end after an error: a retry may still follow


class RunChange(enum.Enum):
    STARTED = "started"
    ENDED = "ended"


@dataclass(slots=True)
class ToolInFlight:
    tool_call_id: str
    name: str
    args: object
    started_at: float
    output: str = ""  # latest cumulative partial output


@dataclass(slots=True)
class PendingDialog:
    request: DialogRequest
    opened_at: float
    expires_at: float | None  # None: waits forever (no timeout of its own, none given)
    # The deadline is the bridge's, not the agent's: the agent would wait forever, so
    # the client cancels the dialog when it passes.
    cancel_at_deadline: bool = False
    held: bool = False  # an answer is on its way: the deadline waits for it


_IN_RUN = (TurnStart, TurnEnd, MessageStart, MessageEnd, MessageUpdate, ToolExecutionStart)


@dataclass
class RunState:
    profile: Profile = PI
    phase: Phase = Phase.IDLE
    compacting: bool = False
    retry_attempt: int = 0
    tools: dict[str, ToolInFlight] = field(default_factory=dict)
    dialogs: dict[str, PendingDialog] = field(default_factory=dict)
    steering: tuple[str, ...] = ()
    follow_up: tuple[str, ...] = ()
    runs_ended: int = 0
    # Seconds the bridge gives a dialog that has no timeout of its own; None: none.
    dialog_timeout: float | None = None

    @property
    def busy(self) -> bool:
        """True from the moment a prompt is written until the run is over."""
        return self.phase is not Phase.IDLE

    # --- inputs from the client ----------------------------------------------

    def prompt_sent(self) -> RunChange | None:
        if self.phase is Phase.IDLE:
            self.phase = Phase.STARTING
            return RunChange.STARTED
        return None

    def prompt_answered(self, success: bool, starts_run: bool = True) -> RunChange | None:
        """The prompt's response. `starts_run=False` for extension commands, whose
        response arrives after their handler ran, with no run of their own."""
        if self.phase is not Phase.STARTING:
            return None
        if success and starts_run:
            self.phase = Phase.RUNNING
            return None
        return self._end()

    def dialog_answered(self, request_id: str) -> None:
        self.dialogs.pop(request_id, None)

    def hold_dialog(self, request_id: str, held: bool = True) -> None:
        """An answer to `request_id` is being claimed (`held`), or the claim failed:
        its deadline must not cancel it while the answer is on its way."""
        dialog = self.dialogs.get(request_id)
        if dialog is not None:
            dialog.held = held

    def settle(self) -> RunChange | None:
        """The grace after an error's agent_end passed with no retry: the run is over."""
        return self._end() if self.phase is Phase.SETTLING else None

    def expire_dialogs(self, now: float) -> list[PendingDialog]:
        """Dialogs whose deadline has passed: resolved by the agent (its own timeout),
        or to be cancelled by the client (`cancel_at_deadline`). The one place any
        dialog deadline is watched."""
        gone = [
            d
            for d in self.dialogs.values()
            if d.expires_at is not None and d.expires_at <= now and not d.held
        ]
        for d in gone:
            del self.dialogs[d.request.id]
        return gone

    def agent_exited(self) -> RunChange | None:
        self.dialogs.clear()
        self.steering = self.follow_up = ()
        self.compacting = False
        return self._end() if self.busy else None

    # --- events --------------------------------------------------------------

    def apply(self, event: object, now: float) -> RunChange | None:
        match event:
            case AgentStart():
                return self._start()
            case AgentEnd():
                return self._agent_end(event)
            case AgentSettled():
                return self._end() if self.busy else None
            case AutoRetryStart(attempt=attempt):
                # Announced after the settle grace, a retry revives a run already ended.
                revived = self.phase is Phase.IDLE
                self.phase = Phase.RETRYING
                self.retry_attempt = attempt
                return RunChange.STARTED if revived else None
            case AutoRetryEnd():
                self.retry_attempt = 0
                return None
        change = self._implicit_start(event)
        self._track(event, now)
        return change

    def _track(self, event: object, now: float) -> None:
        if is_dialog(event):
            self._open_dialog(event, now)
            return
        match event:
            case ToolExecutionStart():
                self.tools[event.toolCallId] = ToolInFlight(
                    event.toolCallId, event.toolName, event.args, now
                )
            case ToolExecutionUpdate(partialResult=partial) if partial is not None:
                tool = self.tools.get(event.toolCallId)
                if tool is not None:
                    tool.output = _text(partial.content)
            case ToolExecutionEnd():
                self.tools.pop(event.toolCallId, None)
            case QueueUpdate():
                self.steering, self.follow_up = tuple(event.steering), tuple(event.followUp)
            case CompactionStart():
                self.compacting = True
            case CompactionEnd() | LegacyCompaction():
                self.compacting = False

    def _open_dialog(self, request: DialogRequest, now: float) -> None:
        timeout = request.timeout
        if timeout is not None and timeout > 0:
            self.dialogs[request.id] = PendingDialog(request, now, now + timeout / 1000)
            return
        own = self.dialog_timeout
        expires = now + own if own is not None else None
        self.dialogs[request.id] = PendingDialog(request, now, expires, expires is not None)

    def _implicit_start(self, event: object) -> RunChange | None:
        if isinstance(event, _IN_RUN) and self.phase in (Phase.IDLE, Phase.STARTING):
            return self._start()
        return None

    def _start(self) -> RunChange | None:
        was_idle = self.phase is Phase.IDLE
        self.phase = Phase.RUNNING
        return RunChange.STARTED if was_idle else None

    def _agent_end(self, event: AgentEnd) -> RunChange | None:
        if self.phase is Phase.IDLE:
            return None
        self.tools.clear()  # a tool without its end event was cut off
        if event.willRetry:
            self.phase = Phase.RETRYING
            return None
        if self.profile.settled_event:
            return None  # wait for agent_settled
        if event.willRetry is None and _ended_in_error(event):
            self.phase = Phase.SETTLING
            return None
        return self._end()

    def _end(self) -> RunChange | None:
        if self.phase is Phase.IDLE:
            return None
        self.phase = Phase.IDLE
        self.tools.clear()
        self.retry_attempt = 0
        self.runs_ended += 1
        return RunChange.ENDED


def _ended_in_error(event: AgentEnd) -> bool:
    for message in reversed(event.messages):
        if isinstance(message, AssistantMessage):
            return message.stopReason == "error"
    return False


def _text(blocks: Sequence[object]) -> str:
    return "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")

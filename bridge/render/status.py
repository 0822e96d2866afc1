"""The live status message of a run, and the session-wide lines it shows.

One `RunStatus` per run: sent as "⏳ working…" with a [⏹ Stop] button when the run
starts, edited at most every `STATUS_INTERVAL` with elapsed time, current tool,
retry and compaction state and the `Board` (queue, extension statuses and
widgets); finished as done / failed / stopped / interrupted without buttons, with the tokens,
cost and share of the context the agent reports (usage.py). Stopped is what
`agent_settled.aborted` says where the agent sends it (1.x), else how the last
answer ended.
The board outlives runs: extensions set their lines once per session.
Invariants: the Stop token is live exactly while the run is; a finished status
is never edited again except to add the reason of an interruption.

`run_is_live` reads that lifecycle back from the ops alone (a status op with
buttons: live; without, or deleted: over), so whoever watches the outbox can
keep a record of live runs without asking the renderer; `retire_after_crash`
is the edit a restarted bridge makes to a status its dead predecessor left live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bridge.model import Button, Delete, Edit, Keyboard, Send
from bridge.render.choices import StopChoice
from bridge.render.textbits import clip, count, delay, duration
from bridge.render.usage import short, tokens_of
from bridge.render.views import Pacer, Slot, View
from bridge.rpc.content import AssistantMessage

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Mention, Op, ReactionState
    from bridge.render.choices import TokenBook
    from bridge.render.usage import ContextUse

STATUS_INTERVAL = 5.0  # seconds between edits of the live status message
WORKING = "⏳ working…"
WAITING = "✋ waiting for approval"
STATUS_SLOT = "status:"  # + run number
CRASHED_SLOT = "crashed:"  # + platform message id: a status left live by a dead bridge
CRASHED = (
    "⚠️ interrupted: the bridge stopped unexpectedly. "
    "Your session is kept; send your message again to continue."
)


@dataclass
class Board:
    """Lines every live status shows: the agent's queue and extension output."""

    statuses: dict[str, str] = field(default_factory=dict)
    widgets: dict[str, list[str]] = field(default_factory=dict)
    steering: int = 0
    follow_ups: int = 0
    approvals: int = 0  # questions of the approval gate waiting for a person

    def set_status(self, key: str, text: str | None) -> None:
        if text:
            self.statuses[key] = text
        else:
            self.statuses.pop(key, None)

    def set_widget(self, key: str, lines: list[str] | None) -> None:
        if lines:
            self.widgets[key] = list(lines)
        else:
            self.widgets.pop(key, None)

    def lines(self) -> list[str]:
        out = []
        if self.steering or self.follow_ups:
            out.append(f"queued: {self._queue()}")
        out += [clip(text, 200) for text in self.statuses.values()]
        for lines in self.widgets.values():
            out += [clip(line, 200) for line in lines]
        return out

    def _queue(self) -> str:
        parts = [count(self.steering, "steer")] if self.steering else []
        if self.follow_ups:
            parts.append(count(self.follow_ups, "follow-up"))
        return ", ".join(parts)


@dataclass
class Numbering:
    """How many runs and assistant messages a renderer has shown: their slots are named
    after them ("status:3", "text:3:7"), so a renderer set back to the same counts
    names a replayed run's messages as before (bridge/conversation/hosts.py)."""

    runs: int = 0
    messages: int = 0
    started: float | None = None  # when a run taken back after a restart really began
    _stretch: tuple[int, bool] | None = None  # (run, inside it) that `_notes` counts in
    _notes: int = 0

    def run_began(self, now: float) -> float:
        """When the run starting `now` began: `now`, unless it is one taken back."""
        started, self.started = self.started, None
        return now if started is None else min(started, now)

    def note(self, in_run: bool) -> str:
        """The name of a one-off message the agent's records make (a notification, an
        error, a compaction): counted afresh in each run ("3.1") and in the stretch
        after it ("3+1"), where a replay starts, so a replay names them as before."""
        if (self.runs, in_run) != self._stretch:
            self._stretch, self._notes = (self.runs, in_run), 0
        self._notes += 1
        return f"{self.runs}{'.' if in_run else '+'}{self._notes}"


@dataclass
class RunStatus:
    number: int
    started: float
    slot: Slot
    stop: Keyboard
    pacer: Pacer = field(default_factory=lambda: Pacer(STATUS_INTERVAL))
    tools: int = 0
    running: dict[str, str] = field(default_factory=dict)  # toolCallId → "bash ls -la"
    retry: str | None = None
    compacting: bool = False
    cost: float = 0.0
    tokens: int = 0  # what the run's answers took, as the agent reports them
    context: ContextUse | None = None  # the context in use when it ended (get_session_stats)
    stopped: bool | None = None  # agent_settled.aborted (1.x): whether it was stopped
    last: AssistantMessage | None = None
    loop_seen: bool = False  # any agent-loop event at all (extension commands have none)
    loop_open: bool = False  # between agent_start and agent_end
    final: str | None = None
    message: str | None = None  # the user's message that started the run (reactions)
    overtime: bool = False  # aborted by the bridge for running too long
    changed: int = 0  # files of the conversation's worktree the run changed
    person: Mention | None = None  # who started it: whom its end pings (pings.py)

    @property
    def owner(self) -> str:
        return f"{STATUS_SLOT}{self.number}"

    @property
    def name(self) -> str:
        """The ops' `Send.run`: where a chat streams runs, the run's stream."""
        return f"run:{self.number}"

    @classmethod
    def begin(cls, number: int, now: float, book: TokenBook) -> RunStatus:
        slot = Slot(f"{STATUS_SLOT}{number}", silent=True, gives_way=True)
        token = book.issue(f"{STATUS_SLOT}{number}", StopChoice())
        return cls(number, now, slot, ((Button("⏹ Stop", token),),))

    def opening(self, now: float) -> list[Op]:
        self.pacer.sent(now)
        return self.slot.show(View(WORKING, buttons=self.stop))

    def refresh(self, board: Board, now: float, *, force: bool = False) -> list[Op]:
        """Show the current state if the pace allows; otherwise remember to."""
        if self.final is not None:
            return []  # the final line is final: a late tick must not reopen it
        if not (force or self.pacer.due(now)):
            self.pacer.dirty = True
            return []
        # Routine: the run's answer and its final line matter more than the clock.
        ops = self.slot.show(View(self.live_text(board, now), buttons=self.stop), routine=True)
        self.pacer.sent(now)
        return ops

    def live_text(self, board: Board, now: float) -> str:
        # Waiting is not working: a person, not the agent, holds the run up.
        state = WAITING if board.approvals else WORKING
        lines = [f"{state} · {duration(now - self.started)}"]
        if self.running:
            lines.append(f"🔧 {list(self.running.values())[-1]}")
        if self.retry:
            lines.append(self.retry)
        if self.compacting:
            lines.append("🗜 compacting…")
        return "\n".join(lines + board.lines())

    def note_assistant(self, message: AssistantMessage) -> None:
        self.last = message
        if message.usage is not None:
            self.cost += float(message.usage.cost.get("total", 0.0) or 0.0)
            self.tokens += tokens_of(message.usage)

    def loop_ended(self, messages: Sequence[object]) -> None:
        self.loop_open = False
        last = [m for m in messages if isinstance(m, AssistantMessage)][-1:]
        if last and self.last is None:
            self.last = last[0]  # message_end was missed; agent_end still knows

    def retrying(self, attempt: int, limit: int, delay_ms: int, error: str) -> None:
        of = f"/{limit}" if limit else ""
        why = f": {clip(error, 160)}" if error else ""
        self.retry = f"↻ retrying {attempt}{of} in {delay(delay_ms / 1000)}{why}"

    def finish(self, now: float) -> list[Op]:
        """The run is over: the final line, no buttons."""
        self.final = self.outcome(now)
        if self.changed:
            self.final += f" · 📝 {count(self.changed, 'file')} changed"
        return self.slot.show(View(self.final))

    def outcome(self, now: float) -> str:
        took = duration(now - self.started)
        last = self.last
        if self.loop_open:
            return f"⚠️ interrupted · {took}"
        if self._aborted():
            return " · ".join([f"⏹ stopped · {took}", *self._spent()])
        if last is not None and last.stopReason == "error":
            return f"⚠️ failed · {took}: {clip(last.errorMessage or 'unknown error', 300)}"
        parts = ["✅ done", took]
        if self.tools:
            parts.append(count(self.tools, "tool"))
        return " · ".join(parts + self._spent())

    def _spent(self) -> list[str]:
        """Tokens, cost and context, each where the agent reported it."""
        parts = [f"{short(self.tokens)} tokens"] if self.tokens > 0 else []
        if self.cost > 0:
            parts.append(_money(self.cost))
        context = self.context.brief() if self.context is not None else None
        return parts + ([context] if context else [])

    def _aborted(self) -> bool:
        """Stopped: as agent_settled says where it says (1.x), else as the last answer
        ended."""
        if self.stopped is not None:
            return self.stopped
        return self.last is not None and _was_aborted(self.last)

    def reaction(self) -> ReactionState:
        """How the user's message is marked once the run is over: a /stop is done
        (the user chose it), an abort for running too long is failed."""
        last = self.last
        if self.loop_open or self.overtime:
            return "failed"
        if last is not None and last.stopReason == "error" and not self._aborted():
            return "failed"
        return "done"

    def interrupted(self, now: float, reason: str) -> list[Op]:
        """End a live run, or add the reason to one that ended cut off."""
        base = (
            self.final
            if self.final is not None
            else f"⚠️ interrupted · {duration(now - self.started)}"
        )
        self.final = f"{base}: {clip(reason, 300)}" if reason else base
        return self.slot.show(View(self.final))


def run_is_live(op: Op) -> bool | None:
    """Whether `op` shows a run's status live (True: it carries [⏹ Stop]) or over
    (False); None when `op` is not about a run's status message."""
    if isinstance(op, Send | Edit) and op.slot.startswith(STATUS_SLOT):
        return bool(op.buttons)
    if isinstance(op, Delete) and op.slot.startswith(STATUS_SLOT):
        return False
    return None


def retire_after_crash(message_id: str) -> tuple[str, Edit]:
    """The slot to adopt the status message `message_id` as, and its final edit: the
    interruption, without buttons (its Stop token died with the earlier process)."""
    slot = f"{CRASHED_SLOT}{message_id}"
    return slot, Edit(slot, CRASHED)


def _was_aborted(message: AssistantMessage) -> bool:
    # 0.87.1 reports an abort after a tool or a dialog as an error (docs/rpc.md,
    # "Aborts reported as errors").
    error = (message.errorMessage or "").lower()
    return message.stopReason == "aborted" or (message.stopReason == "error" and "abort" in error)


def _money(cost: float) -> str:
    return f"${cost:.2f}" if cost >= 0.01 else "<$0.01"

"""The outbox's queues: one `Lane` per platform chat, holding `Entry`s in order.

An entry stays at the head of its lane while its call is in flight and while it
waits for a retry, so the order of a chat never changes and only entries that are
not in flight are merged with newer ops. `log_drop` says why an entry left its lane
undelivered.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from bridge.model import AnswerPress, Delete, Edit, React, Send, Upload
from bridge.platform import PlatformError

if TYPE_CHECKING:
    from bridge.model import ChatRef, Op

log = logging.getLogger("bridge.outbox")


@dataclass(eq=False, slots=True)
class Entry:
    """One queued op; `eq=False` so removal from a queue goes by identity."""

    key: str
    chat: ChatRef
    op: Op
    in_flight: bool = False
    transient_tries: int = 0
    clipped: bool = False
    drafted: bool = False  # its last call showed a draft, which is no chat message
    # When it was submitted (the outbox's clock). A merge keeps the older entry and
    # so its time: the person has waited since the oldest op the merged one replaced.
    since: float = 0.0
    start: bool = False  # a stream start of the platform's budget is taken for it

    def renew(self, op: Op) -> None:
        """New content replaces the op: a cut made for the old text no longer applies.
        `transient_tries` stays: it measures the platform's health, not the content;
        `since` too: the wait for the slot's new text began with the op replaced."""
        self.op = op
        self.clipped = False


@dataclass(eq=False, slots=True)
class Lane:
    """The queue and pacing state of one chat (or of all press answers)."""

    name: str
    paced: bool = True  # press answers skip per-chat pacing
    queue: deque[Entry] = field(default_factory=deque)
    running: bool = False  # a worker is serving this lane
    next_call_at: float = -math.inf  # per-chat pacing
    hold_until: float = -math.inf  # retry_after or back-off

    def rested(self, now: float) -> bool:
        """Whether the next call could go out now: pacing has nothing left to keep."""
        return max(self.next_call_at, self.hold_until) <= now

    def defer(self, key: str) -> bool:
        """Move the entries of conversation `key` behind the others, in their order;
        False when the lane holds nothing else."""
        mine = [entry for entry in self.queue if entry.key == key]
        if len(mine) == len(self.queue):
            return False
        others = [entry for entry in self.queue if entry.key != key]
        self.queue = deque(others + mine)
        return True

    def give_way(self, entry: Entry) -> bool:
        """Move `entry`, at the head, behind the ops queued after it that are not
        giving way themselves, but never past a later op of its own slot (an Edit
        must follow its Send); False when nothing could pass it."""
        slot, passing = slot_of(entry.op), 0
        rest = list(self.queue)[1:]
        for later in rest:
            if gives_way(later.op) or (later.key == entry.key and slot_of(later.op) == slot):
                break
            passing += 1
        if not passing:
            return False
        self.queue = deque([*rest[:passing], entry, *rest[passing:]])
        return True

    def give_way_back(self) -> bool:
        """Bring the first entry giving way to the head: the head waits for something
        else (a stream start, a 429's hold), and a post may be spare now. A Send is
        the first op of its slot, so it passes none of its own. False: none waits."""
        for entry in list(self.queue)[1:]:
            if gives_way(entry.op):
                self.queue.remove(entry)
                self.queue.appendleft(entry)
                return True
        return False

    def last_for(self, key: str, slot: str) -> Entry | None:
        """The newest entry touching `slot` if it can still be merged with: None when
        there is none or it is already in flight."""
        for entry in reversed(self.queue):
            if entry.key == key and slot_of(entry.op) == slot:
                return None if entry.in_flight else entry
        return None

    def followed(self, entry: Entry) -> bool:
        """Whether an op of `entry`'s conversation is queued after it."""
        behind = False
        for later in self.queue:
            if behind and later.key == entry.key:
                return True
            behind = behind or later is entry
        return False

    def next_for(self, entry: Entry) -> Entry | None:
        """The first entry after `entry` that touches the same slot."""
        slot, behind = slot_of(entry.op), False
        for later in self.queue:
            if behind and later.key == entry.key and slot_of(later.op) == slot:
                return later
            behind = behind or later is entry
        return None


_KINDS: Final[dict[type, str]] = {
    Send: "send",
    Edit: "edit",
    Delete: "delete",
    Upload: "upload",
    AnswerPress: "answer_press",
    React: "react",
}


def kind_of(op: Op) -> str:
    """The adapter method an op calls, as counted in `OutboxStats.calls`."""
    return _KINDS[type(op)]


def is_routine(op: Op) -> bool:
    return isinstance(op, Edit) and op.routine


def gives_way(op: Op) -> bool:
    return isinstance(op, Send) and op.gives_way


def slot_of(op: Op) -> str | None:
    return None if isinstance(op, AnswerPress | React) else op.slot


def log_drop(lane: Lane, entry: Entry, error: Exception | None) -> None:
    """Logs name the op, slot and chat, never message text (that stays at DEBUG)."""
    what = (kind_of(entry.op), slot_of(entry.op), lane.name)
    if error is None:
        log.info("outbox: dropped %s of slot %r in chat %s: no message", *what)
    elif isinstance(error, PlatformError):
        log.warning("outbox: gave up on %s of slot %r in chat %s: %s", *what, type(error).__name__)
        log.debug("outbox: %s failure detail: %s", what[0], error)
    else:
        log.error("outbox: unexpected error on %s of slot %r in chat %s", *what, exc_info=error)

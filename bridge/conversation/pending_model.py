"""The messages a busy agent has not taken yet, as the bridge follows them (pure, no I/O).

Each steer or follow-up that arrives while the agent works is an `Entry` until the
agent takes it or someone withdraws it. Where it waits depends on the agent:
- `STEER` / `FOLLOW_UP`: in the agent's own queue. The agent has taken it when a
  `queue_update` no longer lists it (after one did: the update can come before the
  bridge has the command's answer) or when its text comes back as a user message
  of the run (docs/rpc.md, "Steer and follow-up"). Only `clear_queue` (0.87.1) gives it back,
  and it empties the whole queue: `removed` matches what it answered to the
  entries, `requeue` says what goes back in, in the order it was.
- `HELD`: a follow-up the bridge keeps because the agent could never give it back
  (0.73.1, the legacy agent): it goes in as the next prompt once the run ends.
`step` is the whole state machine; `actions` the buttons a state offers.
Invariants: an entry that leaves the waiting states never changes again and leaves
the lineup; entries keep the order they came in.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from bridge.identity import fresh_id

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Image
    from bridge.render.choices import QueueAction as Action

Kind = Literal["steer", "follow_up"]


class Status(enum.Enum):
    HELD = "held"  # a follow-up the bridge keeps until the run ends
    FOLLOW_UP = "follow_up"  # in the agent's follow-up queue
    STEER = "steer"  # in the agent's steering queue
    TAKEN = "taken"
    CANCELLED = "cancelled"
    DROPPED = "dropped"  # the agent stopped before it took it


class Event(enum.Enum):
    TAKE = "take"  # the agent took it, or the bridge sent it as the next prompt
    CANCEL = "cancel"
    PUSH = "push"  # [Steer now]
    GONE = "gone"  # the agent stopped


WAITING = frozenset({Status.HELD, Status.FOLLOW_UP, Status.STEER})
IN_AGENT = frozenset({Status.FOLLOW_UP, Status.STEER})

_S = Status
_STEPS: dict[tuple[Status, Event], Status] = {
    (_S.HELD, Event.TAKE): _S.TAKEN,
    (_S.HELD, Event.CANCEL): _S.CANCELLED,
    (_S.HELD, Event.PUSH): _S.STEER,
    (_S.HELD, Event.GONE): _S.DROPPED,
    (_S.FOLLOW_UP, Event.TAKE): _S.TAKEN,
    (_S.FOLLOW_UP, Event.CANCEL): _S.CANCELLED,
    (_S.FOLLOW_UP, Event.PUSH): _S.STEER,
    (_S.FOLLOW_UP, Event.GONE): _S.DROPPED,
    # A steer is as early as a message gets: there is nothing to push it to.
    (_S.STEER, Event.TAKE): _S.TAKEN,
    (_S.STEER, Event.CANCEL): _S.CANCELLED,
    (_S.STEER, Event.GONE): _S.DROPPED,
}
_BUTTONS: tuple[tuple[Action, Event], ...] = (("steer_now", Event.PUSH), ("cancel", Event.CANCEL))


def step(status: Status, event: Event) -> Status | None:
    """The status after `event`; None where the event means nothing in `status`."""
    return _STEPS.get((status, event))


def actions(status: Status, withdraws: bool) -> tuple[Action, ...]:
    """The buttons of an entry in `status`: the steps a press can still make. One in
    the agent's queue can only be changed where the agent gives it back (`withdraws`)."""
    if status in IN_AGENT and not withdraws:
        return ()
    return tuple(action for action, event in _BUTTONS if step(status, event) is not None)


@dataclass(eq=False)
class Entry:
    id: str
    text: str
    images: tuple[Image, ...]
    message_id: str | None  # the user's message it came from
    status: Status
    seen: bool = False  # a queue_update listed it: missing from a later one, it was taken

    @property
    def kind(self) -> Kind:
        return "steer" if self.status is Status.STEER else "follow_up"


@dataclass(frozen=True, slots=True)
class Removed:
    """One message `clear_queue` took out of the agent's queue; `entry` None for one the
    bridge did not send (it goes back all the same)."""

    kind: Kind
    text: str
    entry: Entry | None


def requeue(removed: Sequence[Removed], target: Entry, event: Event) -> list[Removed]:
    """What goes back into the agent's queue after a clear that withdrew `target` for
    `event`: steers first, as the agent takes them, then (pushed) `target` as the last
    steer, then the follow-ups, each kind in the order it was."""
    rest = [r for r in removed if r.entry is not target]
    pushed = [Removed("steer", target.text, target)] if event is Event.PUSH else []
    steers = [r for r in rest if r.kind == "steer"]
    return steers + pushed + [r for r in rest if r.kind == "follow_up"]


class Lineup:
    def __init__(self) -> None:
        self._entries: list[Entry] = []

    def add(
        self, text: str, images: tuple[Image, ...], message_id: str | None, status: Status
    ) -> Entry:
        # Its message is `queued:<id>`: a fresh id, never one of an earlier process's.
        entry = Entry(f"q{fresh_id()}", text, images, message_id, status)
        self._entries.append(entry)
        return entry

    def forget(self, entry: Entry) -> None:
        """An entry whose command failed: it never was in any queue."""
        if entry in self._entries:
            self._entries.remove(entry)

    def get(self, entry_id: str) -> Entry | None:
        """The waiting entry `entry_id`; None once it stopped waiting."""
        return next((e for e in self._entries if e.id == entry_id), None)

    def waiting(self, *statuses: Status) -> list[Entry]:
        """The waiting entries (of `statuses`, if given), in the order they came."""
        return [e for e in self._entries if not statuses or e.status in statuses]

    def move(self, entry: Entry, event: Event) -> bool:
        """Apply `event` to `entry`; False (and no change) where it means nothing."""
        status = step(entry.status, event)
        if status is None:
            return False
        entry.status = status
        if status not in WAITING:
            self.forget(entry)
        return True

    def listed(
        self, steering: Sequence[str], follow_ups: Sequence[str], *, settled: bool = False
    ) -> list[Entry]:
        """The agent's queues as a `queue_update` (or, `settled`, its last one) shows
        them: the entries in the agent's queue they show taken. The agent takes from
        the front, so the newest entries of a text are the ones still listed."""
        taken: list[Entry] = []
        for status, texts in ((Status.STEER, steering), (Status.FOLLOW_UP, follow_ups)):
            left = Counter(texts)
            for entry in reversed(self.waiting(status)):
                if left[entry.text] > 0:
                    left[entry.text] -= 1
                    entry.seen = True
                elif entry.seen or settled:
                    taken.insert(0, entry)
        return taken

    def heard(self, text: str) -> Entry | None:
        """The user message `text` entered the run: the first entry in the agent's
        queue with that text (steers first: the agent takes them first)."""
        text = text.strip()
        for status in (Status.STEER, Status.FOLLOW_UP):
            for entry in self.waiting(status):
                if entry.text.strip() == text:
                    return entry
        return None

    def removed(
        self, steering: Sequence[str], follow_ups: Sequence[str]
    ) -> tuple[list[Removed], list[Entry]]:
        """`clear_queue`'s answer matched to the entries in the agent's queue, in order;
        and those entries it did not name: the agent had taken them already."""
        out: list[Removed] = []
        missing = self.waiting(*IN_AGENT)
        queues: tuple[tuple[Kind, Sequence[str]], ...] = (
            ("steer", steering),
            ("follow_up", follow_ups),
        )
        for kind, texts in queues:
            for text in texts:
                entry = next((e for e in missing if e.kind == kind and e.text == text), None)
                if entry is not None:
                    missing.remove(entry)
                out.append(Removed(kind, text, entry))
        return out, missing

"""Merging a new op into the queued ops of its slot, where nobody could tell the difference.

A newer Edit replaces the queued Edit of its slot or is folded into its queued Send;
a Delete cancels the queued Edits of its slot and, with a queued Send, the Send and
itself. Only entries not in flight are touched (`Lane.last_for`). These functions
change the lane; the outbox counts what they report and settles removed entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from bridge.model import Delete, Edit, Send, Upload
from bridge.outbox.lanes import slot_of

if TYPE_CHECKING:
    from bridge.model import Op
    from bridge.outbox.lanes import Entry, Lane


@dataclass(slots=True)
class Merge:
    """What submitting an entry did to its lane."""

    absorbed: bool = False  # the new op needs no place in the queue of its own
    removed: list[Entry] = field(default_factory=list)  # queued entries it cancelled

    @property
    def coalesced(self) -> int:
        """Ops merged or cancelled, as `OutboxStats.coalesced` counts them."""
        return len(self.removed) + self.absorbed


def absorb(lane: Lane, entry: Entry) -> Merge:
    """Merge `entry` into `lane`'s queue instead of appending it, where that is safe."""
    op = entry.op
    if isinstance(op, Edit):
        prior = lane.last_for(entry.key, op.slot)
        if prior is not None and op.run_over and lane.followed(prior):
            return Merge()  # merged there, the run's end would pass the run's last ops
        merged = with_content(prior.op, op) if prior is not None else None
        if prior is None or merged is None:
            return Merge()
        prior.renew(merged)
        return Merge(absorbed=True)
    if isinstance(op, Delete):
        merge = Merge()
        while (prior := lane.last_for(entry.key, op.slot)) is not None:
            if isinstance(prior.op, Delete):
                break
            lane.queue.remove(prior)  # an Edit nobody would see, or a Send never made
            merge.removed.append(prior)
            if isinstance(prior.op, Send | Upload):
                merge.absorbed = True  # the Delete itself: nothing is left to delete
                break
        return merge
    return Merge()


def catch_up(lane: Lane, entry: Entry) -> Entry | None:
    """Before retrying `entry`, take in the newer Edit of its slot that queued behind
    it while it was in flight, so the retry carries the newest content. Returns the
    Edit taken in, now removed from the queue."""
    later = lane.next_for(entry)
    if later is None or (isinstance(later.op, Edit) and later.op.run_over):
        return None  # (a run's end keeps its place after the run's last ops)
    return _taken_in(lane, entry, later)


def take_in_next(lane: Lane, entry: Entry) -> Entry | None:
    """Merge into `entry` the Edit of its slot queued right behind it, a run's end
    included (nothing passes between them); returns that Edit, now removed."""
    at = lane.queue.index(entry) + 1
    later = lane.queue[at] if at < len(lane.queue) else None
    if later is None or later.in_flight or later.key != entry.key:
        return None
    return _taken_in(lane, entry, later) if slot_of(later.op) == slot_of(entry.op) else None


def _taken_in(lane: Lane, entry: Entry, later: Entry) -> Entry | None:
    """`later`, an Edit of `entry`'s slot, merged into `entry` and removed from the
    queue; None when it is no Edit or `entry` cannot take it."""
    if not isinstance(later.op, Edit) or (merged := with_content(entry.op, later.op)) is None:
        return None
    entry.renew(merged)
    lane.queue.remove(later)
    return later


def with_content(op: Op, edit: Edit) -> Op | None:
    """A queued Edit or Send of `edit`'s slot, carrying `edit`'s text and buttons
    instead (a Send keeps its notification and reply settings); None for other ops.
    Merged edits are routine only if both were: a wanted change must not wait. A
    sealing Edit (the text is final as last shown) seals the queued op instead, which
    holds that text and has not gone out yet. A run's end (`run_over`) survives
    every merge: it closes the run's stream."""
    if not isinstance(op, Edit | Send):
        return None
    over = op.run_over or edit.run_over  # the end of a run is never merged away
    if edit.seal:
        return replace(op, draft=False, run_over=over)
    if isinstance(op, Edit):
        return replace(edit, routine=op.routine and edit.routine, run_over=over)
    text, plain, markup, buttons = edit.text, edit.plain, edit.markup, edit.buttons
    return replace(
        op,
        text=text,
        plain=plain,
        markup=markup,
        buttons=buttons,
        draft=edit.draft,
        task=edit.task,
        run_over=over,
    )

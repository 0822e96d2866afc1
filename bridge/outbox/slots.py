"""Which platform message each slot of a conversation is, in both directions."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from bridge.model import MessageRef

SLOTS_PER_KEY: Final = 2048  # remembered messages per conversation


@dataclass(slots=True)
class Placed:
    ref: MessageRef
    written_at: float  # last send or edit, for the edit interval
    adopted: bool = False  # sent by an earlier bridge process: edit it, never repost it


class SlotMap:
    """slot ↔ message of one conversation, bounded so a long conversation does not
    grow memory: the least recently used slots are forgotten (an Edit of a forgotten
    slot then posts a new message)."""

    def __init__(self, capacity: int = SLOTS_PER_KEY) -> None:
        self._capacity = capacity
        self._placed: OrderedDict[str, Placed] = OrderedDict()
        self._by_id: dict[str, str] = {}

    def get(self, slot: str) -> Placed | None:
        placed = self._placed.get(slot)
        if placed is not None:
            self._placed.move_to_end(slot)
        return placed

    def bind(self, slot: str, ref: MessageRef, at: float, *, adopted: bool = False) -> None:
        self.forget(slot)
        self._placed[slot] = Placed(ref, at, adopted)
        self._by_id[ref.message_id] = slot
        while len(self._placed) > self._capacity:
            _, oldest = self._placed.popitem(last=False)
            self._by_id.pop(oldest.ref.message_id, None)

    def forget(self, slot: str) -> None:
        placed = self._placed.pop(slot, None)
        if placed is not None:
            self._by_id.pop(placed.ref.message_id, None)

    def slot_for(self, message_id: str) -> str | None:
        return self._by_id.get(message_id)

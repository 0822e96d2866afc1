"""The caps on live agents: how many run at once, and how many one person's hold.

Agents are the expensive part: `AgentSlots` caps how many run at once (`limit`), and
how many one person's conversations hold (`max_per_user`, by the conversation's
owner); when a cap is reached, the least recently active *idle* agent under it is
stopped to make room, and when all of them are busy the newcomer waits, told so in
its chat.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from bridge.conversation.shared import SlotGate

if TYPE_CHECKING:
    from bridge.conversation.shared import Holder

log = logging.getLogger(__name__)


class AgentSlots(SlotGate):
    """The caps on live agents: `limit` over all, and each conversation's
    `max_per_user` over its owner's conversations."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.live: dict[str, Holder] = {}
        self._changed = anyio.Event()

    async def acquire(self, holder: Holder) -> None:
        told: set[str] = set()
        while holder.key not in self.live:
            blocked = self._blocked(holder)
            if blocked is None:
                self.live[holder.key] = holder
                return
            notice, holders = blocked
            victim = _least_recent_idle(holders)
            if victim is not None:
                log.info("evicting idle agent of %s", victim.key)
                await victim.reap()
                continue
            if notice not in told:
                told.add(notice)
                holder.notify(notice)
            await self._changed.wait()

    def _blocked(self, holder: Holder) -> tuple[str, list[Holder]] | None:
        """Why `holder` may not start an agent now, and the live agents one of
        which could make room; None when it may."""
        per_user = max(1, holder.max_per_user)
        owner = holder.owner
        theirs = [c for c in self.live.values() if c.owner == owner]
        if len(theirs) >= per_user:
            working = f"⏳ You have {len(theirs)} agents working"
            return f"{working}; this one waits for one of them to finish.", theirs
        if len(self.live) >= self.limit:
            busy = f"⏳ All {self.limit} agents are busy; waiting for a free one…"
            return busy, list(self.live.values())
        return None

    def admit(self, holder: Holder) -> None:
        self.live[holder.key] = holder

    def release(self, holder: Holder) -> None:
        if self.live.get(holder.key) is holder:
            del self.live[holder.key]
        self.changed()

    def changed(self) -> None:
        """Something may have become free or idle: waiters look again."""
        self._changed.set()
        self._changed = anyio.Event()


def _least_recent_idle(holders: list[Holder]) -> Holder | None:
    idle = [c for c in holders if c.idle]
    return min(idle, key=lambda c: c.last_active, default=None)

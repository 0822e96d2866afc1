"""A worker's settings, and what it knows of each conversation it owns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.scale.lease import Held


@dataclass(frozen=True)
class WorkerSettings:
    name: str
    instance: str  # this process's: a restart with the same name is another instance
    max_agents: int = 100  # conversations owned at once
    lease_ttl: float = 15.0

    @property
    def holder(self) -> str:
        return f"{self.name}/{self.instance}"


@dataclass
class Owned:
    held: Held
    stream: str
    cursor: str = "0"  # "0" or an id: its pending entries still to read; ">" new ones
    inflight: dict[str, str] = field(default_factory=dict)  # event id → entry id
    # Entry ids carried out whose acknowledgement is not made yet: a read of the pending
    # entries (after a failed read, say while Redis is down) must not hand them in again.
    acking: set[str] = field(default_factory=set)
    resume_at: float = 0.0  # after an inbound could not be taken in: read again then

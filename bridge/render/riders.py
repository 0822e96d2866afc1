"""Messages steered or queued into a run ("riders"), followed until they reach the agent.

A steer or follow-up the agent accepted is marked as being worked on; it is marked
with the run's outcome once the agent has it as a user message. What pi does with
its queues when a run is stopped depends on timing (seen with the real agents): a
steer may be taken into the context first, dropped, or kept and taken in by the next
run, whose prompt it then follows; follow-ups are kept for the next run. So a rider
the run ended without rides on into the next run, and only when that one ends
without it too is it marked failed and named, so the user can send it again (a
follow-up still in the agent's queue does not count that against it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bridge.model import React
from bridge.rpc.content import text_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Op, ReactionState
    from bridge.rpc.content import UserMessage


@dataclass(slots=True)
class Rider:
    message_id: str
    text: str
    delivered: bool = False
    missed: bool = False  # a run ended without it already


@dataclass
class Riders:
    riders: list[Rider] = field(default_factory=list)
    follow_ups: tuple[str, ...] = ()  # the agent's follow-up queue, as last reported

    def join(self, message_id: str, text: str) -> list[Op]:
        self.riders.append(Rider(message_id, text.strip()))
        return [React(message_id, "working")]

    def queued(self, follow_ups: Sequence[str]) -> None:
        self.follow_ups = tuple(text.strip() for text in follow_ups)

    def drop(self, message_id: str) -> None:
        """The message was withdrawn from the queue: it will not reach the agent."""
        self.riders = [rider for rider in self.riders if rider.message_id != message_id]

    def heard(self, message: UserMessage) -> None:
        """The agent put a user message into its context: the first rider it is."""
        text = text_of(message.content).strip()
        for rider in self.riders:
            if not rider.delivered and rider.text == text:
                rider.delivered = True
                return

    def end(self, state: ReactionState) -> tuple[list[Op], list[str]]:
        """The run ended as `state`: ops marking the riders, and the texts of those
        that two runs ended without (they will not reach the agent now)."""
        ops: list[Op] = []
        lost: list[str] = []
        kept: list[Rider] = []
        for rider in self.riders:
            if rider.delivered:
                ops.append(React(rider.message_id, state))
            elif rider.missed and rider.text not in self.follow_ups:
                ops.append(React(rider.message_id, "failed"))
                lost.append(rider.text)
            else:
                # Still queued, or perhaps kept by the agent: the next run may take it.
                rider.missed = rider.missed or rider.text not in self.follow_ups
                kept.append(rider)
        self.riders = kept
        return ops, lost

    def fail_all(self) -> list[Op]:
        """The agent is gone (or its prompt never started): none of them will run."""
        riders, self.riders = self.riders, []
        return [React(rider.message_id, "failed") for rider in riders]

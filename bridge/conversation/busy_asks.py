"""Messages that wait: asked about while the agent works (busy policy "ask"), or
held while it compacts its context and sent on once that is over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.conversation.routing import FollowUp, Steer

if TYPE_CHECKING:
    from bridge.model import Image


@dataclass(frozen=True, slots=True)
class Asked:
    """A message the busy question is about: steer now or after this run."""

    text: str
    images: tuple[Image, ...]
    message_id: str | None  # the user's message, marked once it goes in

    def as_intent(self, later: bool) -> Steer | FollowUp:
        return FollowUp(self.text, self.images) if later else Steer(self.text, self.images)


@dataclass(frozen=True, slots=True)
class Held:
    """A message held during a compaction, sent on once it is over."""

    intent: Steer | FollowUp
    message_id: str | None


class Waiting:
    def __init__(self) -> None:
        self._asked: dict[str, Asked] = {}
        self._held: list[Held] = []

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def ask(self, pending_id: str, asked: Asked) -> None:
        self._asked[pending_id] = asked

    def answered(self, pending_id: str) -> Asked | None:
        """The message of busy question `pending_id`, once: None if already answered."""
        return self._asked.pop(pending_id, None)

    def forget_questions(self) -> None:
        self._asked.clear()

    def hold(self, intent: Steer | FollowUp, message_id: str | None) -> None:
        self._held.append(Held(intent, message_id))

    def release(self) -> list[Held]:
        """Everything held, in order; nothing is held after."""
        held, self._held = self._held, []
        return held

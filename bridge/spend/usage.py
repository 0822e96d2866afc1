"""What an agent's answer cost, as the store keeps it, and sums of it (pure).

The agent reports each assistant message's usage (`usage`: input, output, cache read
and cache write tokens, and `cost.total` in dollars, worked out by the agent from the
model's prices). The bridge keeps one `UsageEntry` per message, keyed by its
conversation and `message` (an id the same message has again when it is replayed
after a reattach), so counting it twice is impossible. Stored as JSON by both
backends; adding a field with a default is a compatible change.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from collections.abc import Iterable

    from bridge.rpc.content import AssistantMessage

UsageScope = Literal["conversation", "person", "chat"]


class UsageEntry(BaseModel):
    key: str  # the conversation
    message: str  # the agent's message, within the conversation (`message_id`)
    person: str  # who started the run
    chat: str  # the chat's name (`chat_name`)
    at: float  # unix seconds
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def of(self, scope: UsageScope) -> str:
        return {"conversation": self.key, "person": self.person, "chat": self.chat}[scope]


class UsageTotals(BaseModel):
    messages: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    @classmethod
    def of(cls, entries: Iterable[UsageEntry]) -> UsageTotals:
        totals = cls()
        for e in entries:
            totals = cls(
                messages=totals.messages + 1,
                input=totals.input + e.input,
                output=totals.output + e.output,
                cache_read=totals.cache_read + e.cache_read,
                cache_write=totals.cache_write + e.cache_write,
                cost=totals.cost + e.cost,
            )
        return totals


def message_id(message: AssistantMessage) -> str:
    """The same for a message and its replay: the agent's timestamp (milliseconds)
    and its token counts, which two different answers of one conversation never
    share; the message itself where an agent sends no timestamp."""
    usage = message.usage
    counts = (usage.input, usage.output, usage.cacheRead, usage.cacheWrite) if usage else ()
    if message.timestamp is not None:
        return ":".join(str(n) for n in (message.timestamp, *counts))
    return "h:" + _digest(message.model_dump_json())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def entry_of(
    message: AssistantMessage, *, key: str, person: str, chat: str, at: float
) -> UsageEntry | None:
    """The message's usage as an entry; None for a message that reports none."""
    usage = message.usage
    if usage is None:
        return None
    return UsageEntry(
        key=key,
        message=message_id(message),
        person=person,
        chat=chat,
        at=at,
        input=usage.input,
        output=usage.output,
        cache_read=usage.cacheRead,
        cache_write=usage.cacheWrite,
        cost=_dollars(usage.cost.get("total")),
    )


def _dollars(value: object) -> float:
    """A cost as reported; one that is no finite, non-negative number counts as none
    (a NaN would poison every sum it joins)."""
    try:
        cost = float(value or 0.0)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return cost if math.isfinite(cost) and cost >= 0 else 0.0


def chat_name(key: str, chat_id: str) -> str:
    """A chat as budgets and /usage name it: the platform's prefix of the conversation
    key and the platform's chat id (`tg:-100123`, `slack:C0123`), so a Telegram
    group's topics and a Slack channel's threads count as one chat."""
    return f"{key.partition(':')[0]}:{chat_id}"

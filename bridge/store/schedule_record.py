"""A schedule as the store keeps it (bridge/schedules/ fires it).

A pydantic model that round-trips through JSON unchanged, as the store's other
records do. `state`: "draft" until its maker confirms it (the ticker ignores drafts
and forgets them after a day), then "active" or "paused". `done_until`: every
occurrence at or before it was handled (run or reported missed); it only grows. Its
rule is one of `cron` (an expression), `span` (seconds) or `at` (one time);
`bridge.schedules.rules` turns them into a rule and back.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from bridge.model import ChatRef, Sender

State = Literal["draft", "active", "paused"]


class ScheduleRecord(BaseModel):
    id: str
    key: str  # the conversation it runs in
    chat_id: str
    thread_id: str | None = None
    is_group: bool = False
    owner: str  # the user id of its maker: the runs are theirs
    owner_name: str = ""
    owner_groups: list[str] = []  # their groups when they made it (allowlists name groups)
    words: str  # the time as shown: "weekdays 09:00"
    cron: str = ""
    span: int = 0
    at: float = 0.0
    zone: str = "UTC"
    prompt: str
    state: State = "draft"
    created_at: float
    done_until: float

    @property
    def one_shot(self) -> bool:
        return not self.cron and not self.span

    @property
    def chat(self) -> ChatRef:
        return ChatRef(self.chat_id, self.thread_id, self.is_group)

    @property
    def maker(self) -> Sender:
        return Sender(self.owner, self.owner_name, groups=frozenset(self.owner_groups))

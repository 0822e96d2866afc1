"""Whom a stream in a Slack thread is for: chat.startStream outside a DM wants the
recipient's team and user (docs.slack.dev/reference/methods/chat.startStream).

The adapter notes the first person who writes in each thread, from the inbounds the
runner converts; bounded, so a long-running bridge does not grow with every thread
(a thread forgotten here is answered by posting and editing).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from adapters.slack.convert import team_of

if TYPE_CHECKING:
    from bridge.model import ChatRef, Inbound

RECIPIENTS_KEPT: Final = 10_000


class Recipients:
    """(channel, thread_ts) → (team, user) of the thread's first person."""

    def __init__(self, capacity: int = RECIPIENTS_KEPT) -> None:
        self._capacity = capacity
        self._known: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()

    def note(self, inbound: Inbound) -> None:
        chat, sender = inbound.chat, inbound.sender
        if chat.thread_id is None or inbound.from_self or sender.is_bot or not sender.id:
            return
        where = (chat.chat_id, chat.thread_id)
        if where not in self._known:
            self._known[where] = (team_of(inbound.key), sender.id)
        self._known.move_to_end(where)
        while len(self._known) > self._capacity:
            self._known.popitem(last=False)

    def of(self, chat: ChatRef) -> tuple[str, str] | None:
        """(team, user) a stream in `chat` is for; None when not known."""
        if chat.thread_id is None:
            return None
        return self._known.get((chat.chat_id, chat.thread_id))

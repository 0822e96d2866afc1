"""Which chats show a growing text as a draft, and the draft's id for a slot.

A platform that shows drafts (`Drafting`, Telegram's `sendMessageDraft` in private
chats) gets the ops marked `draft` as drafts; the first refusal in a chat sends
that chat back to posting and editing for as long as this process lives (a chat
whose bot lacks the feature would refuse every draft; asking again each answer
would cost a call and a delay every time, and the fallback loses nothing).
"""

from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING

from bridge.model import Drafting

if TYPE_CHECKING:
    from bridge.model import Adapter, ChatRef

log = logging.getLogger("bridge.outbox")
_MAX_ID = 2**31 - 1  # Telegram ids are signed 32-bit where not said otherwise


class Drafts:
    """The chats that refused a draft, and whether a chat takes drafts now."""

    def __init__(self, adapter: Adapter) -> None:
        self._adapter = adapter if isinstance(adapter, Drafting) else None
        self.refused: set[str] = set()

    def usable(self, chat: ChatRef) -> Drafting | None:
        """The adapter to draft with in `chat`, or None: post and edit instead."""
        adapter = self._adapter
        if adapter is None or chat.chat_id in self.refused or not adapter.drafts_in(chat):
            return None
        return adapter

    def refuse(self, chat: ChatRef, why: Exception) -> None:
        if chat.chat_id not in self.refused:
            log.info(
                "outbox: chat %s refused a draft (%s): posting and editing there",
                chat.chat_id,
                type(why).__name__,
            )
        self.refused.add(chat.chat_id)


def draft_id(key: str, slot: str) -> int:
    """A non-zero id, stable for the slot of the conversation: the same draft is
    updated (animated) while its text grows, another slot's draft replaces it."""
    return zlib.crc32(f"{key}\n{slot}".encode()) % _MAX_ID + 1

"""Which chats show a growing text as a draft, and the draft's id for a slot.

A platform that shows drafts (`Drafting`, Telegram's `sendMessageDraft` in private
chats) gets the ops marked `draft` as drafts; a chat that refused one posts and
edits from then on (`refusals.py`).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from bridge.outbox.refusals import Refusals
from bridge.platform import Drafting

if TYPE_CHECKING:
    from bridge.model import ChatRef
    from bridge.platform import Adapter

_MAX_ID = 2**31 - 1  # Telegram ids are signed 32-bit where not said otherwise


class Drafts(Refusals):
    """The chats that refused a draft, and whether a chat takes drafts now."""

    def __init__(self, adapter: Adapter) -> None:
        super().__init__("a draft")
        self._adapter = adapter if isinstance(adapter, Drafting) else None

    def usable(self, chat: ChatRef) -> Drafting | None:
        """The adapter to draft with in `chat`, or None: post and edit instead."""
        adapter = self._adapter
        if adapter is None or not self.allows(chat) or not adapter.drafts_in(chat):
            return None
        return adapter


def draft_id(key: str, slot: str) -> int:
    """A non-zero id, stable for the slot of the conversation: the same draft is
    updated (animated) while its text grows, another slot's draft replaces it."""
    return zlib.crc32(f"{key}\n{slot}".encode()) % _MAX_ID + 1

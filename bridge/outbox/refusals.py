"""Chats that refused a native way of showing a growing text (drafts, streams).

The first refusal in a chat sends that chat back to posting and editing for as long
as this process lives: a chat (or workspace) without the feature would refuse every
time, and asking again each answer would cost a call and a delay every time, while
the fallback loses nothing. Failures any call can meet (a rate limit, an outage, the
formatting, the length) are no refusal: the outbox retries or falls back from them as
for any call (`is_refusal`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bridge.platform import BadFormatting, RateLimited, TooLong, TransientError

if TYPE_CHECKING:
    from bridge.model import ChatRef
    from bridge.platform import PlatformError

log = logging.getLogger("bridge.outbox")
_NOT_REFUSALS = (RateLimited, TransientError, BadFormatting, TooLong)


def is_refusal(exc: PlatformError) -> bool:
    """Whether `exc` says the chat does not take the feature at all."""
    return not isinstance(exc, _NOT_REFUSALS)


class Refusals:
    """The chats that refused `feature` ("a draft", "a stream")."""

    def __init__(self, feature: str) -> None:
        self._feature = feature
        self.refused: set[str] = set()

    def allows(self, chat: ChatRef) -> bool:
        return chat.chat_id not in self.refused

    def refuse(self, chat: ChatRef, why: Exception) -> None:
        if chat.chat_id not in self.refused:
            log.info(
                "outbox: chat %s refused %s (%s): posting and editing there",
                chat.chat_id,
                self._feature,
                type(why).__name__,
            )
        self.refused.add(chat.chat_id)

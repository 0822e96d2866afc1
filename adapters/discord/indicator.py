"""The typing indicator ("pi is typing…") in a conversation while its agent works.

Discord shows it for 10 seconds after a trigger, or until the bot posts a message
(resources/channel#trigger-typing-indicator), so it is triggered again every
`EVERY` seconds while a chat is working, and right after each message the bot posts
there. A chat works from the first "working" reaction on a person's message (the
bridge marks each message the agent takes) until every message marked in it has its
"done" or "failed"; one the bridge never closes (an agent gone, a bridge that
stopped) is let go after `IDLE` seconds without a message or edit in the chat.

Time comes in as `clock` and `sleep`, so the rules are tested without waiting. A
failed trigger is only logged: the indicator is a nicety, never worth a retry.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from bridge.platform import PlatformError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bridge.model import ChatRef

log = logging.getLogger(__name__)

EVERY = 8.0  # s between triggers: inside Discord's 10 s
IDLE = 120.0  # s without a message, an edit or a new mark: the run is taken as over
TICK = 0.5  # s between looks at what is due


@dataclass
class _Working:
    marked: set[str] = field(default_factory=set)  # the person's messages being worked on
    due: float = 0.0  # when to trigger next
    seen: float = 0.0  # the last sign of work


class TypingIndicator:
    """Which chats are working, and `run`, which keeps their indicator on."""

    def __init__(
        self,
        trigger: Callable[[ChatRef], Awaitable[None]],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._trigger = trigger
        self._clock = clock
        self._sleep = sleep
        self._chats: dict[ChatRef, _Working] = {}

    @property
    def working(self) -> frozenset[ChatRef]:
        return frozenset(self._chats)

    def started(self, chat: ChatRef, message_id: str) -> None:
        """The agent took the person's message `message_id` in `chat`."""
        now = self._clock()
        working = self._chats.setdefault(chat, _Working(due=now))
        working.marked.add(message_id)
        working.seen = now

    def ended(self, chat: ChatRef, message_id: str) -> None:
        """The run that had `message_id` is over."""
        working = self._chats.get(chat)
        if working is None:
            return
        working.marked.discard(message_id)
        if not working.marked:
            del self._chats[chat]

    def posted(self, chat: ChatRef, *, new: bool) -> None:
        """The bot posted (`new`) or edited a message in `chat`: work goes on; a new
        message ended the indicator on Discord's side, so it is triggered again now."""
        working = self._chats.get(chat)
        if working is None:
            return
        now = self._clock()
        working.seen = now
        if new:
            working.due = now

    async def due(self) -> None:
        """Trigger every working chat that is due; let go of the idle ones."""
        now = self._clock()
        for chat, working in list(self._chats.items()):
            if now - working.seen > IDLE:
                del self._chats[chat]
            elif working.due <= now:
                working.due = now + EVERY
                try:
                    await self._trigger(chat)
                except PlatformError as exc:  # a nicety: never worth more than a line
                    log.debug("typing indicator in %s failed: %s", chat.chat_id, exc)

    async def run(self) -> None:
        """Keep the indicators on until cancelled."""
        while True:
            await self.due()
            await self._sleep(TICK)

"""A conversation's intake: its messages taken in order, each routed when its turn comes.

Messages wait in a bounded inbox (`BridgeOptions.inbox_size`; past it the sender is
told, and the message is not sent) and are taken one at a time: the files a message
brought are fetched then, in the conversation's own task, and it is routed against
the conversation's state of that moment (routing.py), so a message that queued
behind a prompt sees the agent busy and steers. Presses and stops never come here
(`Reading.urgent`): the conversation carries them out at once.

A message is read once, where the supervisor took it; one that brought files is
read again once they are fetched, because they make its text (a file's notice, a
voice note's transcript). Messages held while the agent compacted come back here
when it is done (`take_back`), behind those that arrived meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.conversation.busy_asks import Held
from bridge.conversation.routing import FollowUp, Prompt, Steer, View, read, route
from bridge.files.attachments import fetched

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.conversation.intents import Intents
    from bridge.conversation.routing import Reading
    from bridge.conversation.shared import Services
    from bridge.model import Op
    from bridge.projects.project import Projects
    from bridge.render import Renderer
    from bridge.rpc.client import AgentClient

log = logging.getLogger(__name__)

FULL = "⏳ Too many messages are waiting; this one was not sent. Try again shortly."


class IntakeConversation(Protocol):
    """The conversation, as its intake sees it."""

    key: str
    intents: Intents
    projects: Projects  # where a message's files are saved

    @property
    def renderer(self) -> Renderer: ...

    @property
    def agent(self) -> AgentClient | None: ...

    @property
    def busy(self) -> bool: ...

    async def guarded(self, handler: Callable[..., Awaitable[None]], *args: object) -> None: ...

    def submit(self, ops: Sequence[Op]) -> None: ...

    def notify(self, text: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Arrival:
    """A message in the inbox, as read, and when the bridge got it (monotonic)."""

    reading: Reading
    arrived: float


class Intake:
    def __init__(self, conversation: IntakeConversation, services: Services) -> None:
        self._conversation = conversation
        self._services = services
        size = services.options.inbox_size
        self._send, self._inbox = anyio.create_memory_object_stream[Arrival | Held](size)

    @property
    def empty(self) -> bool:
        return self._inbox.statistics().current_buffer_used == 0

    def put(self, reading: Reading, arrived: float) -> None:
        """Queue a message for its turn; never blocks: when the inbox is full the
        sender is told, and the message counts as taken."""
        try:
            self._send.send_nowait(Arrival(reading, arrived))
        except anyio.WouldBlock:
            self._conversation.notify(FULL)
            self._services.taken(reading.inbound)

    def take_back(self, held: Sequence[Held]) -> None:
        """Messages held while the agent compacted: they go in now, in order."""
        for item in held:
            try:
                self._send.send_nowait(item)
            except anyio.WouldBlock:
                text = item.intent.text[:80]
                self._conversation.notify(f"⚠️ Could not deliver a held message: {text}")

    def close(self) -> None:
        """`serve` returns once what is in the inbox is taken."""
        self._send.close()

    async def serve(self) -> None:
        # Both ends are closed when serving ends, however it ends (anyio warns of an
        # unclosed stream when it is collected).
        with self._send, self._inbox:
            async for item in self._inbox:
                await self._conversation.guarded(self._take, item)
                if isinstance(item, Arrival):  # done, or its failure told: not again
                    self._services.taken(item.reading.inbound)

    async def _take(self, item: Arrival | Held) -> None:
        intents = self._conversation.intents
        if isinstance(item, Held):
            await intents.queue(item.intent, item.message_id)
            return
        reading = await self._fetched(item.reading)
        if reading is None:
            return
        if reading.inbound.scheduled:  # the chat sees why the agent starts on its own
            self._conversation.notify(reading.inbound.scheduled)
        view = self._view()
        intent = route(reading, view)
        log.debug(
            "%s: %s is a %s (busy %s)",
            self._conversation.key,
            reading.inbound.event_id,
            type(intent).__name__,
            view.busy,
        )
        await intents.carry_out(intent, item.reading.inbound)
        if isinstance(intent, Prompt | Steer | FollowUp):
            stats = self._services.stats
            stats.inbound_to_agent.observe(self._services.clock() - item.arrived)

    async def _fetched(self, reading: Reading) -> Reading | None:
        """The message with its files fetched, and read again: they made its text.
        None when nothing is left to send (see `fetched`)."""
        if not reading.inbound.attachments:
            return reading
        conversation = self._conversation
        services = self._services
        inbound = await fetched(
            reading.inbound,
            conversation.notify,
            services.options,
            conversation.projects,
            conversation.submit,
        )
        return None if inbound is None else read(inbound, services.prefixes, services.bot_name)

    def _view(self) -> View:
        """The conversation's state, as routing needs it."""
        conversation = self._conversation
        renderer = conversation.renderer
        agent = conversation.agent
        replies: dict[str, str] = {}
        for slot, request_id in renderer.reply_targets().items():
            ref = self._services.outbox.ref(conversation.key, slot)
            if ref is not None:
                replies[ref.message_id] = request_id
        return View(
            busy=conversation.busy,
            compacting=agent is not None and agent.state.compacting,
            policy=renderer.settings.busy_policy,
            input_dialogs=replies,
            awaiting=renderer.awaiting_answers(),
        )

"""Keeps one agent per conversation, within a cap on live agents.

Conversations are made on their first message that needs one (a press on a
button of a conversation not in memory, or a message with nothing in it, is
answered without one). Agents are the expensive part: `AgentSlots` caps how many
run at once (agent_slots.py). The reaper stops agents idle longer than
`idle_timeout` (their sessions resume on the next message), then lets
conversations quiet as long leave memory, with their outbox lanes and slot maps:
their lasting state is in the store. `drain()` is the graceful shutdown. On start,
the status messages an earlier process left live are retired (live_runs.py).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import anyio

from bridge.conversation.agent_slots import AgentSlots
from bridge.conversation.core import Conversation
from bridge.conversation.dialogs import dead_press
from bridge.conversation.live_runs import LiveRuns
from bridge.conversation.routing import Ignore, View, read, route
from bridge.model import ChatRef, Sender

if TYPE_CHECKING:
    from anyio.abc import TaskGroup, TaskStatus

    from bridge.conversation.routing import Reading
    from bridge.conversation.shared import Services
    from bridge.model import Inbound, MessageRef, Op
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

REAP_EVERY = 15.0  # idle timeouts are minutes; checking a few times a minute is plenty
DRAIN_POLL = 0.1
FRESH = View()  # a conversation made now: idle, with no question open


class Supervisor:
    def __init__(self, services: Services, *, shared: bool = False) -> None:
        self.services = services
        # Shared with other workers (bridge/scale/): what an earlier process left is
        # taken over one conversation at a time (`take_over`), as its lease is claimed.
        self.shared = shared
        self.conversations: dict[str, Conversation] = {}
        self.accepting = True
        self.live_runs = LiveRuns(services.store, services.wall)
        services.outbox.observe(self.live_runs.delivered)
        services.outbox.observe(self._delivered)
        self._tg: TaskGroup | None = None

    @property
    def slots(self) -> AgentSlots:
        assert isinstance(self.services.gate, AgentSlots)
        return self.services.gate

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            # Before the first message: a new run of a conversation may then replace
            # its record, never the other way round. Agents still running under their
            # hosts are taken back first: their runs are live, not to be retired.
            if not self.shared:
                await self._retire_live_runs(await self._reattach())
            tg.start_soon(self._reaper)
            task_status.started()
            await anyio.sleep_forever()

    async def _reattach(self) -> set[str]:
        """Take back the agents an earlier bridge left running (hosts.py); the keys of
        those taken."""
        taken: set[str] = set()
        try:
            records = await self.services.store.list_conversations()
        except Exception:
            log.exception("could not look for agents left running")
            return taken
        prefix = self.services.options.key_prefix
        left = [r for r in records if r.host is not None and r.key.startswith(prefix)]

        async def one(record: ConversationRecord) -> None:
            if await self._take_back(record):
                taken.add(record.key)

        async with anyio.create_task_group() as tg:
            for record in left:
                tg.start_soon(one, record)
        if left:
            log.info("took back %d of %d agent(s) left running", len(taken), len(left))
        return taken

    async def _take_back(self, record: ConversationRecord) -> bool:
        assert record.host is not None
        assert self._tg is not None
        host = record.host
        chat = ChatRef(host.chat_id, host.thread_id, host.is_group, host.reader)
        conversation = Conversation(record.key, chat, Sender(record.owner or ""), self.services)
        self.conversations[record.key] = conversation
        await self._tg.start(conversation.run)
        return await conversation.life.reattach(self._tg)

    async def take_over(self, key: str) -> bool:
        """A conversation another process owned until now (`shared`): its agent taken
        back if its host runs on, else its live run retired, as a start does for all.
        Whether its agent was taken back."""
        if key in self.conversations:
            return False
        record = await self.services.store.get_conversation(key)
        if record is not None and record.host is not None and await self._take_back(record):
            return True
        await self.live_runs.retire(self.services.outbox, only=key)
        return False

    async def let_go(self, key: str) -> None:
        """Another process owns `key` now: stop its agent and forget it here, at once."""
        conversation = self.conversations.pop(key, None)
        if conversation is not None:
            await conversation.reap()
            conversation.close()

    async def _delivered(self, key: str, chat: ChatRef, op: Op, ref: MessageRef | None) -> None:
        conversation = self.conversations.get(key)
        if conversation is not None:
            await conversation.life.hosting.delivered(op, ref)

    async def _retire_live_runs(self, skip: set[str]) -> None:
        try:
            retired = await self.live_runs.retire(
                self.services.outbox, self.services.options.key_prefix, skip
            )
        except Exception:  # the chats are more important than their stale buttons
            log.exception("could not retire the runs an earlier process left live")
            return
        if retired:
            log.info("retiring %d run(s) left live by an earlier process", retired)

    async def deliver(self, inbound: Inbound, arrived: float | None = None) -> bool:
        """Hand an admitted inbound to its conversation, read once here; False once
        draining."""
        if not self.accepting:
            return False
        conversation = self.conversations.get(inbound.key)
        if inbound.press is not None and (copied := await self._copy_of(inbound)):
            conversation, inbound = copied
        reading = read(inbound, self.services.prefixes, self.services.bot_name)
        if conversation is None:
            conversation = await self._open(reading)
        if conversation is not None:
            conversation.deliver(reading, arrived)
        return True

    async def _open(self, reading: Reading) -> Conversation | None:
        """A new conversation for `reading`; None when it needs none (it was answered
        here, or there is nothing to do)."""
        inbound = reading.inbound
        if reading.press is not None and not await self._plan_pressed(inbound):
            # Buttons live only in their conversation's memory: none is live here.
            await dead_press(self.services, inbound.key, inbound.chat, reading.press)
            self.services.taken(inbound)
            return None
        nothing = isinstance(route(reading, FRESH), Ignore)
        # A file alone is something, and so is a scheduled run's line (a missed one).
        if nothing and not inbound.attachments and not inbound.scheduled:
            self.services.taken(inbound)
            return None  # no conversation (and no store record) for nothing
        log.debug("conversation %s: opened", inbound.key)
        conversation = Conversation(inbound.key, inbound.chat, inbound.sender, self.services)
        self.conversations[inbound.key] = conversation
        assert self._tg is not None
        try:
            await self._tg.start(conversation.run)
        except Exception:
            del self.conversations[inbound.key]
            raise
        return conversation

    async def _plan_pressed(self, inbound: Inbound) -> bool:
        """A press on the buttons of a plan (plans.py): they are kept in the store, so
        the conversation is made again to carry it out."""
        assert inbound.press is not None
        record = await self.services.store.get_conversation(inbound.key)
        return (
            record is not None
            and record.plan is not None
            and (inbound.press.token in record.plan.tokens)
        )

    async def _copy_of(self, inbound: Inbound) -> tuple[Conversation, Inbound] | None:
        """A press on a copy of another conversation's question (an approver's direct
        message, approval_questions.py): that conversation, and the press as made
        there. Only a chat the copy was posted to counts, so a token carried elsewhere
        is dead."""
        assert inbound.press is not None
        if self.services.options.approvals.notify_approvers != "dm":
            return None  # no copies: no press can be on one
        record = await self.services.store.get_dialog(inbound.press.token)
        if record is None or record.key == inbound.key or inbound.chat.chat_id not in record.copies:
            return None
        owner = self.conversations.get(record.key)
        if owner is None:
            return None
        return owner, dataclasses.replace(inbound, key=owner.key, chat=owner.chat)

    async def _reaper(self) -> None:
        while True:
            await anyio.sleep(REAP_EVERY)
            await self.reap_idle()

    async def reap_idle(self) -> None:
        """Stop agents idle longer than `idle_timeout`; then conversations quiet as long
        leave memory, and the outbox drops what finished chats left behind."""
        cutoff = self.services.clock() - self.services.options.idle_timeout
        for conversation in list(self.slots.live.values()):
            if conversation.idle and conversation.last_active < cutoff:
                log.info("reaping idle agent of %s", conversation.key)
                await conversation.reap()
        self._forget_quiet(cutoff)
        self.services.outbox.sweep(keep=self.conversations)

    def _forget_quiet(self, cutoff: float) -> None:
        # No await from the check to the removal: a message arriving after it makes a
        # new conversation from the store, never one that is half gone.
        for key, conversation in list(self.conversations.items()):
            if not conversation.quiet_since(cutoff):
                continue
            if conversation.close_questions():
                continue  # their edits go out first; a later round forgets it
            del self.conversations[key]
            conversation.close()

    def _live(self) -> list[Conversation]:
        """Conversations holding a live agent's slot."""
        return [c for k, c in list(self.conversations.items()) if k in self.slots.live]

    def _working(self) -> bool:
        """A run is on, or a message is being carried out: it may be about to start one
        (its budget checked in the store before it takes a slot, ledger.py)."""
        conversations = list(self.conversations.values())
        return any(c.busy for c in self._live()) or any(c.handling for c in conversations)

    async def drain(self, grace: float | None = None) -> None:
        """Stop intake, let runs finish up to `grace` seconds, then end every agent;
        with `on_stop = "detach"`, leave every agent running under its host at once."""
        self.accepting = False
        options = self.services.options
        detach = options.on_stop == "detach"
        limit = options.drain_timeout if grace is None else grace
        if detach:
            limit = 0.0  # the agents run on under their hosts: nothing to wait for
        with anyio.move_on_after(limit):
            # Polled: "no conversation busy" is a state over many agents, not one event.
            while self._working():  # noqa: ASYNC110
                await anyio.sleep(DRAIN_POLL)
        for conversation in self._live():
            if conversation.busy and not detach:
                conversation.interrupt(
                    "⏹ interrupted: the bridge is restarting. Your session is kept."
                )
        async with anyio.create_task_group() as tg:
            for conversation in self._live():
                tg.start_soon(conversation.life.detach if detach else conversation.reap)
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

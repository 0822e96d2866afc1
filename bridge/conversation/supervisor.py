"""Keeps one agent per conversation, within a cap on live agents.

Conversations are made on their first message that needs one (a press on a
button of a conversation not in memory, or a message with nothing in it, is
answered without one). Agents are the expensive part: `AgentSlots` caps how many
run at once, and how many one person's conversations hold (`max_per_user`, by the
conversation's owner); when a cap is reached, the least recently active *idle*
agent under it is stopped to make room, and when all of them are busy the
newcomer waits, told so in its chat. The reaper stops agents idle longer than
`idle_timeout` (their sessions resume on the next message), then lets
conversations quiet as long leave memory, with their outbox lanes and slot maps:
their lasting state is in the store. `drain()` is the graceful shutdown.

A run's status message carries [⏹ Stop] until the run ends; a process killed
without a drain leaves it so for good. `LiveRuns` therefore keeps a record in the
store of each conversation's live status message, from the ops the outbox carries
out, and on start edits the ones an earlier process left live to say it stopped
(once: each record is dropped as its edit is queued) and marks the user's messages
that the run was working on (its prompt, and any steered into it) failed. The
agent's session is on disk, so the conversation itself resumes on its next message
as after any restart.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import anyio

from bridge.conversation.core import Conversation
from bridge.conversation.dialogs import dead_press
from bridge.conversation.routing import Ignore, View, read, route
from bridge.conversation.shared import Holder, Services, SlotGate
from bridge.model import ChatRef, MessageRef, React, Sender
from bridge.render.status import retire_after_crash, run_is_live
from bridge.store.records import LiveRunRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.conversation.routing import Reading
    from bridge.model import Inbound, Op
    from bridge.outbox import Outbox
    from bridge.store.base import Store
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

REAP_EVERY = 15.0  # idle timeouts are minutes; checking a few times a minute is plenty
DRAIN_POLL = 0.1
FRESH = View()  # a conversation made now: idle, with no question open


class AgentSlots(SlotGate):
    """The caps on live agents: `limit` over all, and each conversation's
    `max_per_user` over its owner's conversations."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.live: dict[str, Holder] = {}
        self._changed = anyio.Event()

    async def acquire(self, holder: Holder) -> None:
        told: set[str] = set()
        while holder.key not in self.live:
            blocked = self._blocked(holder)
            if blocked is None:
                self.live[holder.key] = holder
                return
            notice, holders = blocked
            victim = _least_recent_idle(holders)
            if victim is not None:
                log.info("evicting idle agent of %s", victim.key)
                await victim.reap()
                continue
            if notice not in told:
                told.add(notice)
                holder.notify(notice)
            await self._changed.wait()

    def _blocked(self, holder: Holder) -> tuple[str, list[Holder]] | None:
        """Why `holder` may not start an agent now, and the live agents one of
        which could make room; None when it may."""
        per_user = max(1, holder.max_per_user)
        owner = holder.owner
        theirs = [c for c in self.live.values() if c.owner == owner]
        if len(theirs) >= per_user:
            working = f"⏳ You have {len(theirs)} agents working"
            return f"{working}; this one waits for one of them to finish.", theirs
        if len(self.live) >= self.limit:
            busy = f"⏳ All {self.limit} agents are busy; waiting for a free one…"
            return busy, list(self.live.values())
        return None

    def admit(self, holder: Holder) -> None:
        self.live[holder.key] = holder

    def release(self, holder: Holder) -> None:
        if self.live.get(holder.key) is holder:
            del self.live[holder.key]
        self.changed()

    def changed(self) -> None:
        """Something may have become free or idle: waiters look again."""
        self._changed.set()
        self._changed = anyio.Event()


def _least_recent_idle(holders: list[Holder]) -> Holder | None:
    idle = [c for c in holders if c.idle]
    return min(idle, key=lambda c: c.last_active, default=None)


class LiveRuns:
    """The store's record of live status messages (see the module docstring)."""

    def __init__(self, store: Store, wall: Callable[[], float]) -> None:
        self._store = store
        self._wall = wall
        self._recorded: dict[str, LiveRunRecord] = {}  # conversation key → its live run
        self._working: dict[str, list[str]] = {}  # conversation key → its messages marked 👀

    async def delivered(self, key: str, chat: ChatRef, op: Op, ref: MessageRef | None) -> None:
        """An outbox observer: only a run's start and end (and its prompt's reactions)
        touch the store, not its progress edits."""
        if isinstance(op, React):
            await self._reacted(key, op)
            return
        live = run_is_live(op)
        recorded = self._recorded.get(key)
        if live and ref is not None and (recorded is None or ref.message_id != recorded.message_id):
            record = _record(key, chat, ref.message_id, self._wall(), self._working.get(key, []))
            self._recorded[key] = record
            await self._store.put_live_run(record)
        elif live is False and recorded is not None:
            del self._recorded[key]
            await self._store.drop_live_run(key, recorded.message_id)

    async def _reacted(self, key: str, react: React) -> None:
        # Reactions have a lane of their own: 👀 may land before or after the status.
        working = self._working.setdefault(key, [])
        if react.state == "working":
            working.append(react.message_id)
        elif react.message_id in working:
            working.remove(react.message_id)
        if not working:
            del self._working[key]
        recorded = self._recorded.get(key)
        if recorded is not None and recorded.working_on != working:
            record = recorded.model_copy(update={"working_on": list(working)})
            self._recorded[key] = record
            await self._store.put_live_run(record)

    async def retire(
        self, outbox: Outbox, key_prefix: str = "", skip: Collection[str] = (), only: str = ""
    ) -> int:
        """Queue the edit of every status an earlier process left live in conversations
        under `key_prefix` (another platform's are not this outbox's to edit), but
        those in `skip` (their agents run on), or only `only`'s; how many there were."""
        records = [
            r
            for r in await self._store.live_runs()
            if r.key.startswith(key_prefix) and r.key not in skip and (r.key == only or not only)
        ]
        for record in records:
            chat = ChatRef(record.chat_id, record.thread_id, record.is_group)
            slot, edit = retire_after_crash(record.message_id)
            outbox.adopt(record.key, slot, MessageRef(chat, record.message_id))
            outbox.submit(record.key, chat, [edit])
            outbox.submit(record.key, chat, [React(m, "failed") for m in record.working_on])
            await self._store.drop_live_run(record.key, record.message_id)
        return len(records)


def _record(
    key: str, chat: ChatRef, message_id: str, now: float, working_on: list[str]
) -> LiveRunRecord:
    return LiveRunRecord(
        key=key,
        chat_id=chat.chat_id,
        thread_id=chat.thread_id,
        is_group=chat.is_group,
        message_id=message_id,
        started_at=now,
        working_on=list(working_on),
    )


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
        chat = ChatRef(host.chat_id, host.thread_id, host.is_group)
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
        if reading.press is not None:
            # Buttons live only in their conversation's memory: none is live here.
            await dead_press(self.services, inbound.key, inbound.chat, reading.press)
            self.services.taken(inbound)
            return None
        nothing = isinstance(route(reading, FRESH), Ignore)
        if nothing and not inbound.attachments:  # a file alone is something
            self.services.taken(inbound)
            return None  # no conversation (and no store record) for nothing
        conversation = Conversation(inbound.key, inbound.chat, inbound.sender, self.services)
        self.conversations[inbound.key] = conversation
        assert self._tg is not None
        try:
            await self._tg.start(conversation.run)
        except Exception:
            del self.conversations[inbound.key]
            raise
        return conversation

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
            while any(c.busy for c in self._live()):  # noqa: ASYNC110
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

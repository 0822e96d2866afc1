"""Agents that outlive the bridge: a conversation's host, and how far its chat is shown.

With `on_stop = "detach"` each agent starts under a host (`bridge/rpc/agenthost`), whose
address the conversation's record keeps (`HostRecord`). A bridge that stops detaches,
one that dies just goes; the next one finds the host through the store and asks for
every record after the last one whose output the chat fully shows (`applied`).

How nothing is shown twice: a run's records are replayed through a renderer set back
to the counts it had when that run began (so its messages get the same slot names),
and every message posted since `applied` is in `slots`, adopted by the outbox before
the replay, so the replay edits those messages instead of posting them again
(`outbox.recovery.replayed`); what never went out goes out once. `applied` moves to a
run's end only once everything that run showed has been delivered and no new run has
begun, and the host is then told it may forget those records.

So a replay may go through a run the chat already shows to its end (the next run
began before the last ops of this one were delivered; or the process died just
then). Its status message says "✅ done" by then, and the replayed run's opening
would edit it back to "⏳ working…" with [⏹ Stop] (its end follows, but not at once:
the ops between them keep it from merging). The status slots delivered with their
final line are kept in the record (`ended`), and a replay makes no op on them.

Why a take-back costs little however long the runs have run: what the records after
`applied` show is kept, folded small (`bridge/rpc/shown.py`), in the store as a
snapshot, at most every `SHOWN_EVERY` seconds per conversation (`SHOWN_AT_TOOL` after a
tool starts or ends); once it is stored the host may forget the records it covers. A
take-back replays the snapshot's records, then asks the host for those after it: the
renderer ends where the whole records would have left it, with a replay of a few
records instead of every delta since the run began. A snapshot names its host (pid and
start time) and the last record it covers, and keeps each entry's sequence number, so
one left over from another host or from before a run counted as shown is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.model import AnswerPress, Delete, Edit, MessageRef, Send, Upload
from bridge.platform import Streaming
from bridge.render.status import Numbering, run_is_live
from bridge.rpc.events import ToolExecutionEnd, ToolExecutionStart
from bridge.rpc.hostlink import HostAddress, HostLink, HostPlan, process_start, remove_stale
from bridge.rpc.profile import PROFILES
from bridge.rpc.shown import Snapshot
from bridge.store.records import HostRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anyio.abc import TaskGroup

    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, Op
    from bridge.options import BridgeOptions
    from bridge.render import Renderer
    from bridge.rpc.agent_event import AgentEvent
    from bridge.rpc.client import AgentClient
    from bridge.rpc.profile import Profile
    from bridge.store.base import Store
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

SETTLE_POLL = 0.1
HOLD_LIMIT = 5.0  # seconds a replay's ops may be held before they go out anyway
STREAM = "stream:"  # a recorded slot naming the message of a run's Slack stream
SETTLE_LIMIT = 60.0  # for a run's last messages to go out before it counts as shown
SHOWN_EVERY = 3.0  # seconds between snapshots of what a conversation's run has shown
SHOWN_AT_TOOL = 0.5  # at least this long between them, when a tool starts or ends
# The host, the last seq applied (or a snapshot covers), the profile, the snapshot's
# records after the last seq applied.
Reattach = tuple[HostAddress, int, "Profile", list[tuple[int, bytes]]]


def host_plan(options: BridgeOptions, key: str) -> HostPlan | None:
    """Where a new agent of `key` is hosted (None: as a child, with `on_stop = "stop"`).
    The socket is named by a hash of the key: short, and safe as a file name."""
    if options.on_stop != "detach":
        return None
    name = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return HostPlan(
        socket=options.data_dir / "hosts" / f"{name}.sock",
        detach_timeout=options.detach_timeout,
        run_limit=options.max_run_time,
    )


def address_of(record: HostRecord) -> HostAddress:
    return HostAddress(record.socket, record.pid, record.started)


def alive(record: HostRecord) -> bool:
    return process_start(record.pid) == record.started


class HostingConversation(Protocol):
    """The conversation, as its hosting sees it."""

    chat: ChatRef

    @property
    def key(self) -> str: ...

    @property
    def record(self) -> ConversationRecord | None: ...

    @property
    def renderer(self) -> Renderer: ...

    async def save(self, **changes: object) -> None: ...

    def submit(self, ops: Sequence[Op]) -> None: ...


class Hosting:
    def __init__(self, conversation: HostingConversation, services: Services) -> None:
        self._conversation = conversation
        self.services = services
        self.plan = host_plan(services.options, conversation.key)  # None: agents are children
        # The chat ops of a replay, held until it has caught up with what the agent
        # wrote meanwhile, then sent at once: the outbox merges each message's edits
        # into one, so an answer is not shown going back to its start and growing again.
        self._held: list[Op] | None = None
        self._held_since = 0.0
        # Snapshots (bridge/rpc/shown.py): when the last was taken, the last record the
        # last stored one covers, one being stored, and the lock that keeps the store's
        # writes and drops of them in order.
        self._shown_at: float | None = None
        self._shown_through = 0
        self._shown_busy = False
        self._shown_soon = False  # a tool started or ended since: due sooner
        self._shown_lock = anyio.Lock()
        # The status slots an earlier process showed to their end: the replay's ops on
        # them are dropped (this process's own, e.g. an interruption's reason, are not).
        self._ended: frozenset[str] = frozenset()

    @property
    def _record(self) -> HostRecord | None:
        record = self._conversation.record
        return record.host if record is not None else None

    async def prepare(self) -> Reattach | None:
        """Before a reattach: the renderer set back (its live run's clock too), the
        messages shown since adopted, and what to reattach to (None: no host, or it
        is gone)."""
        record = self._record
        if record is None or not alive(record):
            return None
        conversation = self._conversation
        live = [r for r in await self.services.store.live_runs() if r.key == conversation.key]
        began = None
        if live:  # the store's times are wall-clock; the renderer's are monotonic
            began = self.services.clock() - (self.services.wall() - live[0].started_at)
        conversation.renderer.counts = Numbering(record.runs, record.messages, began)
        self._ended = frozenset(record.ended)
        self._held = []
        self._held_since = self.services.clock()
        for slot, message_id in (await self._end_streams(record)).items():
            ref = MessageRef(conversation.chat, message_id)
            self.services.outbox.adopt(conversation.key, slot, ref)
        profile = PROFILES.get(record.profile, PROFILES["pi"])
        after, shown = record.applied, []
        snapshot = await self._snapshot(record)
        if snapshot is not None and snapshot.through > record.applied:
            after, shown = snapshot.through, snapshot.after(record.applied)
            log.info(
                "%s: taken back from a snapshot of %d records up to #%d (shown from #%d)",
                conversation.key,
                len(shown),
                after,
                record.applied,
            )
        self._shown_through = after
        return address_of(record), after, profile, shown

    async def _snapshot(self, record: HostRecord) -> Snapshot | None:
        """The stored snapshot of what the host of `record` has shown (None: none, or
        one of another host)."""
        try:
            text = await self.services.store.get_shown(self._conversation.key)
        except Exception:
            # Unreadable for now: the whole replay from `applied` is what it costs,
            # unless the host forgot what the snapshot covered (then it is lost).
            log.warning("%s: could not read its snapshot", self._conversation.key, exc_info=True)
            return None
        snapshot = Snapshot.decode(text) if text is not None else None
        if snapshot is None or (snapshot.pid, snapshot.started) != (record.pid, record.started):
            return None
        return snapshot

    def progress(self, agent: AgentClient, event: AgentEvent | None, tg: TaskGroup) -> None:
        """After each record (`event`) and at each tick (None): now and then, what the
        run has shown goes to the store."""
        link = agent.link
        record = self._record
        if not isinstance(link, HostLink) or record is None or self._shown_busy:
            return
        now = self.services.clock()
        if self._shown_at is None:
            self._shown_at = now
            return
        if isinstance(event, ToolExecutionStart | ToolExecutionEnd):
            self._shown_soon = True
        wait = SHOWN_AT_TOOL if self._shown_soon else SHOWN_EVERY
        seq = link.last_seq
        if seq <= max(self._shown_through, record.applied) or now - self._shown_at < wait:
            return
        self._shown_at, self._shown_soon = now, False
        self._shown_busy = True
        tg.start_soon(self._keep_shown, link, self._snapshot_now(link, record))

    async def leaving(self, agent: AgentClient) -> None:
        """The bridge detaches: a last snapshot, so the next one replays only what the
        agent writes meanwhile."""
        link = agent.link
        record = self._record
        if not isinstance(link, HostLink) or record is None:
            return
        if link.last_seq > max(self._shown_through, record.applied):
            self._shown_busy = True
            await self._keep_shown(link, self._snapshot_now(link, record))

    def _snapshot_now(self, link: HostLink, record: HostRecord) -> Snapshot:
        address = link.address
        records = link.shown.records(record.applied)
        return Snapshot(address.pid, address.started, link.last_seq, records)

    async def _keep_shown(self, link: HostLink, snapshot: Snapshot) -> None:
        key = self._conversation.key
        try:
            async with self._shown_lock:
                host = f"{snapshot.pid}:{snapshot.started}"
                through = snapshot.through
                text = snapshot.encode()
                if not await self.services.store.put_shown(key, text, host=host, through=through):
                    return  # another owner has kept more since: this one is fenced off
                self._shown_through = snapshot.through
        except Exception:
            # Not kept: the host keeps the records, and the next snapshot tries again.
            log.warning("%s: could not keep its snapshot", key, exc_info=True)
            return
        finally:
            self._shown_busy = False
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await link.ack(snapshot.through)  # stored: the host may forget them

    def held(self, ops: Sequence[Op]) -> Sequence[Op]:
        """Of `ops`, those to send now: all, unless a replay is on (a press is
        answered at once even then); none on a status an earlier process ended."""
        if self._ended:
            ops = [
                op
                for op in ops
                if not isinstance(op, Send | Edit | Delete) or op.slot not in self._ended
            ]
        if self._held is None:
            return ops
        self._held += [op for op in ops if not isinstance(op, AnswerPress)]
        return [op for op in ops if isinstance(op, AnswerPress)]

    def caught_up(self, agent: AgentClient) -> None:
        """After each record: once the replay has reached what the host had when the
        bridge came back (or has taken too long), its held ops go out."""
        link = agent.link
        if self._held is None:
            return
        # The reader may be ahead of what is rendered: caught up once nothing waits.
        waiting = agent.events.statistics().current_buffer_used
        done = not isinstance(link, HostLink) or (link.last_seq >= link.replay_end and not waiting)
        if done or self.services.clock() - self._held_since > HOLD_LIMIT:
            # What the pace held back of the replay shows at once: else the chat would
            # show less than before the restart until the next tick.
            renderer = self._conversation.renderer
            self._held += renderer.tick(self.services.clock(), force=True)
            self._release()

    def _release(self) -> None:
        ops, self._held = self._held, None
        if ops:
            self._conversation.submit(ops)

    def posted(self, op: Op) -> bool:
        """Whether `op` posts what a message from before a restart already shows."""
        record = self._record
        return record is not None and isinstance(op, Upload) and op.slot in record.slots

    async def started(self, agent: AgentClient) -> None:
        """An agent is up: a new host is recorded (a reattached one is already)."""
        link = agent.link
        if not isinstance(link, HostLink):
            return
        known = self._record
        if known is not None and address_of(known) == link.address:
            return
        self._shown_at, self._shown_through = None, 0  # a new host numbers from 1
        counts = self._conversation.renderer.counts
        chat = self._conversation.chat
        record = HostRecord(
            socket=link.address.socket,
            pid=link.address.pid,
            started=link.address.started,
            profile=agent.profile.name,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            is_group=chat.is_group,
            reader=chat.reader,
            runs=counts.runs,
            messages=counts.messages,
        )
        await self._conversation.save(host=record)

    async def delivered(self, op: Op, ref: MessageRef | None) -> None:
        """An outbox observer: a message posted for this conversation is remembered
        until its run counts as shown, so a replay edits it rather than post it again."""
        record = self._record
        if record is None:  # no host: the usual case with on_stop = "stop"
            return
        slots = dict(record.slots)
        stream = self.services.outbox.streams.run_of(self._conversation.key)
        if stream is not None:  # a Slack stream holds the run: its message, too
            slots[f"{STREAM}{stream.run}"] = stream.ref.message_id
        if ref is not None and isinstance(op, Send | Upload):
            slots[op.slot] = ref.message_id
        ended = list(record.ended)
        if isinstance(op, Send | Edit) and run_is_live(op) is False and op.slot not in ended:
            ended.append(op.slot)  # its final line: a replay must not reopen it
        if slots != record.slots or ended != record.ended:
            await self._update(slots=slots, ended=ended)

    async def _end_streams(self, record: HostRecord) -> dict[str, str]:
        """Stop the streams an earlier bridge left open (their run goes on in a new
        one, as it is replayed) and clear the thread's status line; the other slots."""
        adapter = self.services.adapter
        chat = self._conversation.chat
        for slot, message_id in record.slots.items():
            if slot.startswith(STREAM) and isinstance(adapter, Streaming):
                # Gone or refused, in any way (the platform's or, in a scale-out, the
                # Redis hop's): nothing to stop, and the replay goes on regardless.
                with contextlib.suppress(Exception):
                    await adapter.stop_stream(MessageRef(chat, message_id), "")
                with contextlib.suppress(Exception):
                    await adapter.set_status(chat, "")
        return {k: v for k, v in record.slots.items() if not k.startswith(STREAM)}

    def run_ended(self, agent: AgentClient, tg: TaskGroup) -> None:
        """A run ended: once what it showed is delivered, it counts as shown."""
        link = agent.link
        if isinstance(link, HostLink) and self._record is not None:
            counts = self._conversation.renderer.counts
            tg.start_soon(self._settle, agent, link, link.last_seq, counts.runs, counts.messages)

    async def _settle(
        self, agent: AgentClient, link: HostLink, seq: int, runs: int, messages: int
    ) -> None:
        key = self._conversation.key
        outbox = self.services.outbox
        with anyio.move_on_after(SETTLE_LIMIT):
            while outbox.pending(key) and not agent.state.busy:  # noqa: ASYNC110 (polled)
                await anyio.sleep(SETTLE_POLL)
        if agent.state.busy or outbox.pending(key) or self._record is None:
            return  # a new run began: its own end settles both
        await self._update(applied=seq, runs=runs, messages=messages, slots={}, ended=[])
        link.shown.forget(seq)
        await self._drop_shown(seq)
        # Lost, the host keeps them a little longer: `applied` is what counts.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await link.ack(seq)

    async def _drop_shown(self, through: int | None) -> None:
        """The stored snapshot, once it covers nothing after `through` (a snapshot that
        covers more is kept: the host may have forgotten what it covers; None: the
        host is gone, it goes whatever it covers)."""
        with contextlib.suppress(Exception):  # left: ignored, as covering nothing new
            async with self._shown_lock:
                if through is None or self._shown_through <= through:
                    await self.services.store.drop_shown(self._conversation.key)

    async def gone(self) -> None:
        """The agent ended for good: nothing is left to reattach to."""
        self._release()  # what a replay showed so far is shown
        record = self._record
        if record is not None:
            remove_stale(address_of(record))
            await self._conversation.save(host=None)
            await self._drop_shown(None)

    async def _update(self, **changes: object) -> None:
        record = self._record
        if record is None:
            return
        try:
            await self._conversation.save(host=record.model_copy(update=changes))
        except Exception:
            # The store is down for a moment (each backend fails in its own words): the
            # record is a little behind (a take-back would replay a little more), which
            # is no reason to end the conversation. The traceback shows if it was a bug.
            key = self._conversation.key
            log.warning("%s: could not record its host", key, exc_info=True)


async def stop_all(store: Store, key_prefix: str = "") -> int:
    """End every agent left running under a host (`pi-bridge stop-agents`): each host
    gets SIGTERM, which ends its agent in order. How many there were."""
    stopped = 0
    for record in await store.list_conversations():
        host = record.host
        if host is None or not record.key.startswith(key_prefix):
            continue
        if alive(host):
            with contextlib.suppress(OSError):
                os.kill(host.pid, signal.SIGTERM)
                stopped += 1
        await store.put_conversation(record.model_copy(update={"host": None}))
    return stopped

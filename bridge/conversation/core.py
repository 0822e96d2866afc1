"""One conversation: its inbox, and the intents it carries out.

A `Conversation` lives in memory while it is in use. Its agent comes and goes
(lifetime.py) in its workplace (projects.py); its questions are dialogs.py's (the
approval gate's, approving.py's); messages waiting for the agent are queued.py's and
waiting.py's (held for a compaction or an answer). Once it is quiet (`quiet_since`)
the supervisor lets it go; its lasting state is in the store, so its next message
makes it again as it was. Messages are routed when taken from the inbox, not when
they arrive, so a message that queued behind a prompt sees the agent busy and
steers. Presses and /stop skip the inbox (`router.urgent`): they must act while a
prompt is still being answered.

Invariants: everything shown in the chat goes through the renderer and the outbox;
nothing one conversation does (a crash, a platform error, a press with another's
token) reaches another; a dialog is answered at most once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from bridge import controls
from bridge.conversation.agent_lifetime import AgentLife, crashed
from bridge.conversation.approval_questions import Approvals
from bridge.conversation.busy_asks import Asked, Held, Waiting
from bridge.conversation.dialogs import Dialogs
from bridge.conversation.pending import Queued
from bridge.conversation.routing import (
    AskBusy,
    Control,
    DialogReply,
    FollowUp,
    Hold,
    Ignore,
    Intent,
    Press,
    Prompt,
    Steer,
    Stop,
    View,
    route,
    urgent,
)
from bridge.files.attachments import as_content, fetched
from bridge.model import AnswerPress, Inbound
from bridge.projects.project import Projects
from bridge.render import BusyChoice, DialogChoice, PickerChoice, QueueChoice, Renderer, StopChoice
from bridge.rpc.errors import AgentExited, RpcError
from bridge.rpc.events import CompactionEnd, LegacyCompaction
from bridge.rpc.signals import AgentGone, DialogExpired, RunEnded, RunStarted
from bridge.rpc.ui import ConfirmRequest, EditorRequest, InputRequest, SelectRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, ConversationSettings, Op, PlatformLimits, Sender
    from bridge.rpc.agent_event import AgentEvent
    from bridge.rpc.client import AgentClient
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

FULL = "⏳ Too many messages are waiting; this one was not sent. Try again shortly."


class Conversation:
    def __init__(self, key: str, chat: ChatRef, first_sender: Sender, services: Services) -> None:
        self.key = key
        self.chat = chat
        self.s = services
        self._first_sender = first_sender
        self.record: ConversationRecord | None = None
        self.renderer = Renderer(
            limits=services.adapter.limits,
            formatter=services.adapter.format,
            tokens=services.tokens,
            settings=services.options.settings_of(key),
        )
        self.life = AgentLife(self, services)
        self.dialogs = Dialogs(key, chat, services, self.renderer, lambda: self.record, self.submit)
        self.queued = Queued(self, self._prompt)  # steers and follow-ups not taken yet
        self.approvals = Approvals(self, services)  # hooks itself into the dialogs
        self.projects = Projects(self, services.options)  # where the agent works
        self.last_active = services.clock()
        inbox = anyio.create_memory_object_stream[Inbound | Held](services.options.inbox_size)
        self._inbox_send, self._inbox = inbox
        self._tg: TaskGroup | None = None
        self._waiting = Waiting()
        self._arrived: dict[int, float] = {}  # id(queued inbound) → when it arrived
        self._handling = 0  # intents and presses being carried out right now

    # --- lifecycle -------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.record = await self._load_record()
        self.renderer.settings = self.record.settings
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            async for item in self._inbox:
                await self._guarded(self._take, item)
                if isinstance(item, Inbound):  # done, or its failure told: not again
                    self.s.taken(item)

    @property
    def agent(self) -> AgentClient | None:
        return self.life.agent

    @property
    def idle(self) -> bool:
        """Live, not spawning and not running: may be reaped or evicted."""
        agent = self.agent
        return not self.life.spawning and agent is not None and not agent.state.busy

    @property
    def busy(self) -> bool:
        return self.life.busy

    @property
    def limits(self) -> PlatformLimits:
        return self.s.adapter.limits

    @property
    def max_per_user(self) -> int:
        return self.s.options.max_per_user

    @property
    def owner(self) -> str:
        """Who started the conversation: the per-user cap counts agents by them."""
        return (self.record.owner if self.record else None) or self._first_sender.id

    async def reap(self) -> None:
        """Stop the agent (its session file stays; the next message resumes it)."""
        await self.life.reap()

    def interrupt(self, reason: str) -> None:
        self.submit(self.renderer.interrupt(reason))

    def quiet_since(self, cutoff: float) -> bool:
        """No agent, nothing queued or being handled, no output pending, and nothing
        new since `cutoff`: the conversation may leave memory once its questions are
        closed (`close_questions`)."""
        return (
            self.agent is None
            and not self.life.spawning
            and self._handling == 0
            and not self._waiting.holding
            and self._inbox.statistics().current_buffer_used == 0
            and self.s.outbox.pending(self.key) == 0
            and self.last_active < cutoff
        )

    def close_questions(self) -> bool:
        """Retire the buttons of questions nobody answered (a busy question, a dialog
        of an agent stopped since, a picker); whether there were any."""
        if not self.renderer.has_questions():
            return False
        self._waiting.forget_questions()
        self.submit(self.renderer.close_questions("✖ no longer active"))
        return True

    def close(self) -> None:
        """Leave memory: `run` returns, its inbox being empty (see `quiet_since`)."""
        self._inbox_send.close()

    # --- intake ------------------------------------------------------------------------

    def deliver(self, inbound: Inbound, arrived: float | None = None) -> None:
        """An admitted inbound (`arrived`: when the bridge got it); never blocks."""
        self.last_active = self.s.clock()
        # Presses and stops do not queue behind waiting messages: a stop must reach
        # the run it stops, a press the dialog that is open now.
        now = urgent(inbound, self.s.prefixes, self.s.bot_name)
        if self._tg is not None and now is not None:
            self._tg.start_soon(self._urgent, now, inbound)
            return
        try:
            self._inbox_send.send_nowait(inbound)
            self._arrived[id(inbound)] = self.last_active if arrived is None else arrived
        except anyio.WouldBlock:
            self.notify(FULL)
            self.s.taken(inbound)

    async def _urgent(self, intent: Intent, inbound: Inbound) -> None:
        await self._guarded(self.carry_out, intent, inbound)
        self.s.taken(inbound)

    async def _take(self, item: Inbound | Held) -> None:
        if isinstance(item, Held):
            await self._queue(item.intent, item.message_id)
            return
        arrived = self._arrived.pop(id(item), None)
        inbound = await fetched(item, self.notify, self.s.options, self.projects, self.submit)
        if inbound is None:
            return
        intent = route(inbound, self._view())
        await self.carry_out(intent, item)
        if arrived is not None and isinstance(intent, Prompt | Steer | FollowUp):
            self.s.stats.inbound_to_agent.observe(self.s.clock() - arrived)

    def _view(self) -> View:
        agent = self.agent
        replies: dict[str, str] = {}
        for slot, request_id in self.renderer.reply_targets().items():
            ref = self.s.outbox.ref(self.key, slot)
            if ref is not None:
                replies[ref.message_id] = request_id
        return View(
            busy=self.busy,
            compacting=agent is not None and agent.state.compacting,
            policy=self.renderer.settings.busy_policy,
            input_dialogs=replies,
            awaiting=self.renderer.awaiting_answers(),
            bot_name=self.s.bot_name,
            prefixes=self.s.prefixes,
        )

    async def _guarded(self, handler: Callable[..., Awaitable[None]], *args: object) -> None:
        """One intent's failure is told to the user and ends there."""
        self._handling += 1
        try:
            await handler(*args)
        except AgentExited:
            pass  # the event pump reports the crash once
        except RpcError as exc:
            self.notify(f"⚠️ {exc}")
        except Exception:
            log.exception("conversation %s: handler failed", self.key)
            self.notify("⚠️ Something went wrong in the bridge; see its log.")
        finally:
            self._handling -= 1

    # --- intents ---------------------------------------------------------------------------

    async def carry_out(self, intent: Intent, inbound: Inbound | None) -> None:
        message_id = inbound.message_id if inbound is not None else None
        match intent:
            case Prompt():
                await self._prompt(intent, message_id)
            case Steer() | FollowUp():
                await self._queue(intent, message_id)
            case AskBusy():
                pending = self.s.tokens()
                self._waiting.ask(pending, Asked(intent.text, intent.images, message_id))
                self.submit(self.renderer.ask_busy(pending, intent.text[:200]))
            case Hold():
                self._waiting.hold(intent.then, message_id)
                self.notify(
                    "⏸ The agent is compacting its context; your message goes in when it is done."
                )
            case Stop():
                await self._stop()
            case Press() if inbound is not None:
                await self._press(intent, inbound.sender)
            case DialogReply() if inbound is not None:
                await self.dialogs.replied(self.agent, intent, inbound.sender)
            case Control():
                self.submit(await controls.run(self, intent.name, intent.arg))
            case Ignore():
                log.debug("conversation %s: ignored (%s)", self.key, intent.reason)

    async def _prompt(self, intent: Prompt, message_id: str | None) -> None:
        """Start a run; the user's message shows it is being worked on until it ends."""
        agent = await self.ensure_agent()
        self.submit(self.renderer.working_on(message_id))
        if not agent.state.busy:
            await self.projects.before_run()  # the run's changed files count from here
        try:
            await agent.prompt(intent.text, as_content(intent.images))
        except BaseException:
            self.submit(self.renderer.not_started())
            raise

    async def _queue(self, intent: Steer | FollowUp, message_id: str | None) -> None:
        if not await self.queued.add(intent, message_id):  # no run on: it starts one
            await self._prompt(Prompt(intent.text, intent.images), message_id)

    async def _stop(self) -> None:
        agent = self.agent
        if agent is None or not agent.state.busy:
            self.notify("Nothing is running.")
            return
        self._waiting.release()  # a stop drops them too
        self.queued.stopped()
        await agent.abort()

    async def _press(self, press: Press, sender: Sender) -> None:
        match self.renderer.pressed(press.token):
            case StopChoice():
                self.submit([AnswerPress(press.press_id, "Stopping…")])
                await self._stop()
            case BusyChoice() as choice:
                await self._busy_choice(press, choice)
            case DialogChoice() as choice:
                await self.dialogs.chosen(self.agent, press, choice, sender)
            case QueueChoice() as choice:
                await self.queued.pressed(press, choice, sender)
            case PickerChoice() as choice:
                self.submit([AnswerPress(press.press_id, "✓")])
                self.submit(self.renderer.close_picker(choice.picker_id, choice.outcome))
                self.submit(await controls.pick(self, choice.kind, choice.value))
            case None:
                await self.dialogs.stale(self.agent, press, sender)

    async def _busy_choice(self, press: Press, choice: BusyChoice) -> None:
        ask = self._waiting.answered(choice.pending_id)
        if ask is None:
            await self.dialogs.stale(self.agent, press)
            return
        later = choice.mode == "follow_up"
        answer = "Queued for after this run." if later else "Sent now."
        self.submit([AnswerPress(press.press_id, answer)])
        outcome = "⏭ after this run" if later else "➡️ sent now"
        self.submit(self.renderer.close_busy(choice.pending_id, outcome))
        await self._queue(ask.as_intent(later), ask.message_id)

    # --- the agent ------------------------------------------------------------------------

    async def ensure_agent(self) -> AgentClient:
        assert self._tg is not None
        return await self.life.ensure(self._tg)

    async def adopt_session(self, agent: AgentClient) -> None:
        await self.life.adopt_session(agent)

    async def on_event(self, agent: AgentClient, event: AgentEvent, now: float) -> None:
        """One agent event: shown by the renderer, then what else it means here."""
        if isinstance(event, SelectRequest) and await self.approvals.asked(agent, event, now):
            return  # the approval gate's question: approving.py shows it, or allows it
        self.submit(self.renderer.apply(event, now))
        self.queued.observe(event)
        match event:
            case RunStarted():
                self.life.run_started(now)
            case RunEnded():
                self.life.run_ended()
                self.last_active = now
                assert self._tg is not None
                self._tg.start_soon(self._guarded, self.adopt_session, agent)
                self._tg.start_soon(self._guarded, self.queued.run_ended)
            case SelectRequest() | ConfirmRequest() | InputRequest() | EditorRequest():
                await self.dialogs.opened(event, now)
            case DialogExpired():
                await self.dialogs.expired(event)
            case CompactionEnd() | LegacyCompaction():
                self._release_held()
            case AgentGone():
                await self._gone(event)

    def _release_held(self) -> None:
        for item in self._waiting.release():
            try:
                self._inbox_send.send_nowait(item)
            except anyio.WouldBlock:
                self.notify(f"⚠️ Could not deliver a held message: {item.intent.text[:80]}")

    async def _gone(self, event: AgentGone) -> None:
        await self.dialogs.agent_gone()
        # Held for a compaction that will never end now: say so rather than lose them
        # silently (sending them on could start the same failure again).
        held = self._waiting.release()
        if self.life.closing:
            return
        self.notify(crashed(event))
        for item in held:
            self.notify(f"⚠️ Not sent, please send again: “{item.intent.text[:80] or 'a picture'}”")

    # --- records and output ------------------------------------------------------------------

    async def _load_record(self) -> ConversationRecord:
        record = await self.s.store.get_conversation(self.key)
        if record is None:
            record = self.s.options.new_record(self.key, self._first_sender.id, self.s.wall())
            await self.s.store.put_conversation(record)
        return record

    async def save(self, **changes: object) -> None:
        assert self.record is not None
        self.record = self.record.model_copy(update={**changes, "last_active": self.s.wall()})
        await self.s.store.put_conversation(self.record)

    async def set_settings(self, settings: ConversationSettings) -> None:
        self.renderer.settings = settings
        await self.save(settings=settings)

    def submit(self, ops: Sequence[Op]) -> None:
        if ops := self.life.hosting.held(ops):  # a replay's go out once it caught up
            self.s.outbox.submit(self.key, self.chat, ops)
            self.approvals.mirror(ops)

    def notify(self, text: str) -> None:
        self.submit(self.renderer.notice(text))

    def new_token(self) -> str:
        return self.s.tokens()

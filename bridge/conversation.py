"""One conversation: its agent process, its renderer, and the intents it carries out.

A `Conversation` lives in memory while it is in use; its agent comes and goes
(spawned on the first message, reaped when idle, respawned with `--session <file>`
after a crash, a reap or a bridge restart). Once it is quiet (`quiet_since`: no
agent, nothing queued or being handled, no output pending) the supervisor lets it
go; its lasting state is in the store, so its next message makes it again as it
was. Messages are routed when they are taken from the inbox, not when they
arrive, so a message that queued behind a prompt sees the agent busy and steers.
Button presses and /stop skip the inbox: they must act while a prompt is still
being answered.

Invariants: everything shown in the chat goes through the renderer and the
outbox; nothing one conversation does (a crash, a platform error, a press with
another's token) reaches another; a dialog is answered at most once (the store's
`take_dialog` decides), and one the bridge timed out is always cancelled.
"""

from __future__ import annotations

import base64
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge import controls
from bridge.model import (
    MAX_ATTACHMENT,
    AnswerPress,
    AttachmentRefused,
    ConversationSettings,
    Image,
    Inbound,
)
from bridge.render import BusyChoice, DialogChoice, Renderer, StopChoice
from bridge.router import (
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
)
from bridge.rpc import (
    AgentClient,
    AgentExited,
    AgentGone,
    AgentSpec,
    RpcError,
    RunEnded,
    RunStarted,
)
from bridge.rpc.content import ImageContent
from bridge.rpc.events import CompactionEnd, LegacyCompaction
from bridge.rpc.signals import DialogExpired
from bridge.rpc.ui import DIALOG_METHODS
from bridge.sandbox import contain
from bridge.stats import Stats
from bridge.store.records import AuditEntry, ConversationRecord, DialogRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.model import Adapter, ButtonPress, ChatRef, Op, Sender
    from bridge.options import BridgeOptions
    from bridge.outbox import Outbox
    from bridge.rpc import AgentEvent
    from bridge.store.base import Store

log = logging.getLogger(__name__)

TICK = 0.25  # renderer flushes throttled text; well under any platform's edit interval
KILL_AFTER_ABORT = 15.0  # a run past max_run_time that ignores abort is killed
# Restart back-off: an agent that dies this soon after starting counts as a crash loop.
CRASH_WINDOW = 60.0
MAX_BACKOFF = 60.0
# One image from the platform's file host: 20 MB at a slow few MB/s, with room to spare.
FETCH_TIMEOUT = 60.0
NO_LONGER_ACTIVE = "This is no longer active."


class SlotGate(Protocol):
    """What a conversation needs from the supervisor's live-agent cap."""

    async def acquire(self, conversation: Conversation) -> None: ...

    def release(self, conversation: Conversation) -> None: ...

    def changed(self) -> None: ...


@dataclass
class Services:
    """What every conversation shares."""

    adapter: Adapter
    outbox: Outbox
    store: Store
    options: BridgeOptions
    gate: SlotGate
    tokens: Callable[[], str]
    clock: Callable[[], float]  # monotonic: run times, throttling
    wall: Callable[[], float]  # unix time: records and audit
    bot_name: str = ""
    prefixes: tuple[str, ...] = ("/",)
    stats: Stats = field(default_factory=Stats)


@dataclass
class _Ask:
    text: str
    images: tuple[Image, ...]
    message_id: str | None  # the user's message, marked once it goes in


@dataclass(frozen=True, slots=True)
class _Held:
    """A message held during a compaction, sent on once it is over."""

    intent: Steer | FollowUp
    message_id: str | None


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
        self.agent: AgentClient | None = None
        self.spawning = False
        self.last_active = services.clock()
        send, receive = anyio.create_memory_object_stream[Inbound | _Held](
            services.options.inbox_size
        )
        self._inbox_send, self._inbox = send, receive
        self._tg: TaskGroup | None = None
        self._agent_scope: anyio.CancelScope | None = None
        self._agent_done = anyio.Event()
        self._held: list[_Held] = []
        self._asks: dict[str, _Ask] = {}
        self.pickers: dict[str, tuple[str, str]] = {}  # token → (picker kind, value)
        self._deadlines: dict[str, float] = {}  # bridge-side dialog timeouts
        self._asked_at: dict[str, float] = {}  # open dialogs → when shown (answer latency)
        self._arrived: dict[int, float] = {}  # id(queued inbound) → when it arrived
        self._run_started: float | None = None
        self._aborted_for_time = False
        self._spawns: list[float] = []
        self._closing = False
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

    @property
    def idle(self) -> bool:
        """Live, not spawning and not running: may be reaped or evicted."""
        agent = self.agent
        return not self.spawning and agent is not None and not agent.state.busy

    @property
    def busy(self) -> bool:
        return self.spawning or (self.agent is not None and self.agent.state.busy)

    async def reap(self) -> None:
        """Stop the agent (its session file stays; the next message resumes it)."""
        scope = self._agent_scope
        if scope is None:
            return
        self._closing = True
        scope.cancel()
        await self._agent_done.wait()

    def interrupt(self, reason: str) -> None:
        self._submit(self.renderer.interrupt(reason))

    @property
    def owner(self) -> str:
        """Who started the conversation: the per-user cap counts agents by them."""
        record = self.record
        owner = record.owner if record is not None else None
        return owner or self._first_sender.id

    def quiet_since(self, cutoff: float) -> bool:
        """No agent, nothing queued or being handled, no output pending, and nothing
        new since `cutoff`: the conversation may leave memory once its questions are
        closed (`close_questions`)."""
        return (
            self.agent is None
            and not self.spawning
            and self._handling == 0
            and not self._held
            and self._inbox.statistics().current_buffer_used == 0
            and self.s.outbox.pending(self.key) == 0
            and self.last_active < cutoff
        )

    def close_questions(self) -> bool:
        """Retire the buttons of questions nobody answered (a busy question, a dialog
        of an agent stopped since); whether there were any."""
        if not self.renderer.has_questions():
            return False
        self._asks.clear()
        self.pickers.clear()
        self._submit(self.renderer.close_questions("✖ no longer active"))
        return True

    def close(self) -> None:
        """Leave memory: `run` returns, its inbox being empty (see `quiet_since`)."""
        self._inbox_send.close()

    # --- intake ------------------------------------------------------------------------

    def deliver(self, inbound: Inbound, arrived: float | None = None) -> None:
        """Called by the bridge for an admitted inbound; never blocks. `arrived`: when
        the bridge got it (for the inbound-to-agent latency)."""
        self.last_active = self.s.clock()
        # Presses and stops do not queue behind waiting messages: a stop must reach
        # the run it stops, a press the dialog that is open now.
        if self._tg is not None and inbound.press is not None:
            self._tg.start_soon(self._guarded, self._take, inbound)
            return
        stop = self._stop_in(inbound)
        if self._tg is not None and stop is not None:
            self._tg.start_soon(self._guarded, self.carry_out, stop, inbound)
            return
        try:
            self._inbox_send.send_nowait(inbound)
            self._arrived[id(inbound)] = self.last_active if arrived is None else arrived
        except anyio.WouldBlock:
            self._submit(
                self.renderer.notice(
                    "⏳ Too many messages are waiting; this one was not sent. Try again shortly."
                )
            )

    def _stop_in(self, inbound: Inbound) -> Stop | None:
        """The Stop `inbound` asks for, routed as if a run were going: one may be
        starting from a message still in the inbox."""
        intent = route(inbound, View(busy=True, prefixes=self.s.prefixes, bot_name=self.s.bot_name))
        return intent if isinstance(intent, Stop) else None

    async def _take(self, item: Inbound | _Held) -> None:
        if isinstance(item, _Held):
            await self._queue(item.intent, item.message_id)
            return
        arrived = self._arrived.pop(id(item), None)
        fetched = await self._fetched(item)
        if fetched is None:
            return
        intent = route(fetched, self._view())
        await self.carry_out(intent, item)
        if arrived is not None and isinstance(intent, Prompt | Steer | FollowUp):
            self.s.stats.inbound_to_agent.observe(self.s.clock() - arrived)

    async def _fetched(self, inbound: Inbound) -> Inbound | None:
        """`inbound` with its attachments fetched: here, after admission and in this
        conversation's task, so a stranger's or a slow file holds up nobody else.
        None when nothing is left to send (an image alone that could not be had)."""
        if not inbound.attachments:
            return inbound
        images: list[Image] = []
        problems: list[str] = []
        for attachment in inbound.attachments:
            try:
                if attachment.size is not None and attachment.size > MAX_ATTACHMENT:
                    raise AttachmentRefused(
                        f"it is {_mb(attachment.size)}, the limit is {_mb(MAX_ATTACHMENT)}"
                    )
                with anyio.fail_after(FETCH_TIMEOUT):
                    images.append(
                        Image(await attachment.fetch(MAX_ATTACHMENT), attachment.mime_type)
                    )
            except AttachmentRefused as exc:
                problems.append(str(exc))
            except TimeoutError:
                problems.append(f"it did not arrive within {FETCH_TIMEOUT:g} s")
        if problems:
            rest = "your text went on without it" if inbound.text.strip() else "nothing was sent"
            why = "; ".join(problems)
            self._submit(self.renderer.notice(f"⚠️ Couldn't fetch your image ({why}); {rest}."))
        if not inbound.text.strip() and not images:
            return None
        return replace(inbound, images=(*inbound.images, *images), attachments=())

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
            self._submit(self.renderer.notice(f"⚠️ {exc}"))
        except Exception:
            log.exception("conversation %s: handler failed", self.key)
            self._submit(self.renderer.notice("⚠️ Something went wrong in the bridge; see its log."))
        finally:
            self._handling -= 1

    # --- intents ---------------------------------------------------------------------------

    async def carry_out(self, intent: Intent, inbound: Inbound | None) -> None:
        message_id = inbound.message_id if inbound is not None else None
        if isinstance(intent, Prompt):
            await self._prompt(intent, message_id)
        elif isinstance(intent, Steer | FollowUp):
            await self._queue(intent, message_id)
        elif isinstance(intent, AskBusy):
            pending = self.s.tokens()
            self._asks[pending] = _Ask(intent.text, intent.images, message_id)
            self._submit(self.renderer.ask_busy(pending, intent.text[:200]))
        elif isinstance(intent, Hold):
            self._held.append(_Held(intent.then, message_id))
            self._submit(
                self.renderer.notice(
                    "⏸ The agent is compacting its context; your message goes in when it is done."
                )
            )
        elif isinstance(intent, Stop):
            await self._stop()
        elif isinstance(intent, Press) and inbound is not None:
            await self._press(intent, inbound.sender)
        elif isinstance(intent, DialogReply) and inbound is not None:
            await self._reply(intent, inbound.sender)
        elif isinstance(intent, Control):
            self._submit(await controls.run(self, intent.name, intent.arg))
        elif isinstance(intent, Ignore):
            log.debug("conversation %s: ignored (%s)", self.key, intent.reason)

    async def _prompt(self, intent: Prompt, message_id: str | None) -> None:
        """Start a run; the user's message shows it is being worked on until it ends."""
        agent = await self.ensure_agent()
        self._submit(self.renderer.working_on(message_id))
        try:
            await agent.prompt(intent.text, self._images(intent.images))
        except BaseException:
            self._submit(self.renderer.not_started())
            raise

    async def _queue(self, intent: Steer | FollowUp, message_id: str | None) -> None:
        agent = self.agent
        if agent is None or not agent.state.busy:
            await self._prompt(Prompt(intent.text, intent.images), message_id)
            return
        images = self._images(intent.images)
        if isinstance(intent, Steer):
            await agent.steer(intent.text, images)
        else:
            await agent.follow_up(intent.text, images)
        # Accepted: the message shows it reached the run, as a prompt's does.
        self._submit(self.renderer.joined(message_id, intent.text))

    async def _stop(self) -> None:
        agent = self.agent
        if agent is None or not agent.state.busy:
            self._submit(self.renderer.notice("Nothing is running."))
            return
        self._held.clear()
        await agent.abort()

    async def _press(self, press: Press, sender: Sender) -> None:
        choice = self.renderer.pressed(press.token)
        if choice is None and press.token in self.pickers:
            kind, value = self.pickers.pop(press.token)
            self._answer(press, "✓")
            self._submit(await controls.pick(self, kind, value))
            return
        if isinstance(choice, StopChoice):
            self._answer(press, "Stopping…")
            await self._stop()
        elif isinstance(choice, BusyChoice):
            await self._busy_choice(press, choice)
        elif isinstance(choice, DialogChoice):
            await self._dialog_choice(press, choice, sender)
        else:
            await self._stale(press)

    async def _busy_choice(self, press: Press, choice: BusyChoice) -> None:
        ask = self._asks.pop(choice.pending_id, None)
        if ask is None:
            await self._stale(press)
            return
        later = choice.mode == "follow_up"
        self._answer(press, "Queued for after this run." if later else "Sent now.")
        self._submit(
            self.renderer.close_busy(
                choice.pending_id, "⏭ after this run" if later else "➡️ sent now"
            )
        )
        intent = FollowUp(ask.text, ask.images) if later else Steer(ask.text, ask.images)
        await self._queue(intent, ask.message_id)

    def may_answer(self, sender: Sender) -> bool:
        record = self.record
        approvers = self.s.options.approvers_of(self.key) | set(record.approvers if record else ())
        owner = record.owner if record else None
        return sender.id == owner or sender.named_in(approvers)

    async def _dialog_choice(self, press: Press, choice: DialogChoice, sender: Sender) -> None:
        if not self.may_answer(sender):
            self._submit(
                [
                    AnswerPress(
                        press.press_id,
                        "Only the person who started this conversation or an approver can answer.",
                        alert=True,
                    )
                ]
            )
            return
        typed = press.text if choice.form is not None else None
        if choice.form is not None and typed is None:
            # [Answer] on a platform without forms: ask for the answer as a message.
            self._answer(press, "")  # the message it posts says what to do
            self._submit(self.renderer.ask_reply(choice.request_id, sender.id))
            return
        agent = self.agent
        if agent is None or not await self._claim(choice.request_id):
            await self._stale(press)
            return
        await agent.answer_dialog(
            choice.request_id,
            value=typed if typed is not None else choice.value,
            confirmed=choice.confirmed,
            cancelled=choice.cancelled,
        )
        label = typed[:100] if typed is not None else choice.label
        self._answer(press, f"✓ {label}")
        await self._settled(choice.request_id, sender, label)

    async def _reply(self, reply: DialogReply, sender: Sender) -> None:
        agent = self.agent
        if not self.may_answer(sender):
            self._submit(
                self.renderer.notice(
                    "Only the person who started this conversation or an approver can answer."
                )
            )
            return
        if agent is None or not await self._claim(reply.request_id):
            self._submit(self.renderer.notice("That question is no longer active."))
            return
        await agent.answer_dialog(reply.request_id, value=reply.text)
        await self._settled(reply.request_id, sender, reply.text[:100])

    async def _claim(self, request_id: str) -> bool:
        """Take dialog `request_id` to answer it: from the store, so it is answered at
        most once, and from the bridge's deadlines, so its expiry does not cancel it
        while the answer is on its way. False if it is not there to take."""
        deadline = self._deadlines.pop(request_id, None)
        if await self.s.store.take_dialog(request_id, self.key):
            return True
        if deadline is not None:
            self._deadlines[request_id] = deadline  # still the agent's to time out
        return False

    async def _settled(self, request_id: str, sender: Sender, label: str) -> None:
        asked = self._asked_at.pop(request_id, None)
        if asked is not None:
            self.s.stats.dialog_answer.observe(self.s.clock() - asked)
        self._submit(
            self.renderer.close_dialog(request_id, f"✅ {sender.name or sender.id} chose: {label}")
        )
        await self.s.store.audit(
            AuditEntry(
                at=self.s.wall(),
                key=self.key,
                user_id=sender.id,
                user_name=sender.name,
                request_id=request_id,
                choice=label,
            )
        )

    async def _stale(self, press: Press) -> None:
        await dead_press(self.s, self.key, self.chat, press, self._agent_awaits)

    def _agent_awaits(self, request_id: str) -> bool:
        """Whether the live agent still waits for an answer to dialog `request_id`."""
        agent = self.agent
        return agent is not None and request_id in agent.state.dialogs

    def _answer(self, press: Press, text: str) -> None:
        self._submit([AnswerPress(press.press_id, text)])

    # --- the agent ------------------------------------------------------------------------

    async def ensure_agent(self) -> AgentClient:
        if self.agent is not None and self.agent.alive:
            return self.agent
        assert self._tg is not None
        await self._backoff()
        self.spawning = True
        try:
            await self.s.gate.acquire(self)
            try:
                agent: AgentClient = await self._tg.start(self._agent_task)
            except BaseException:
                self.s.gate.release(self)
                raise
        finally:
            self.spawning = False
        return agent

    async def _backoff(self) -> None:
        now = self.s.clock()
        recent = [t for t in self._spawns if now - t < CRASH_WINDOW]
        self._spawns = recent
        if len(recent) >= 2:
            delay = min(MAX_BACKOFF, 2.0 ** (len(recent) - 1))
            self._submit(
                self.renderer.notice(f"⏳ The agent keeps stopping; trying again in {delay:g} s.")
            )
            await anyio.sleep(delay)
        self._spawns.append(self.s.clock())

    def spec(self) -> AgentSpec:
        options = self.s.options
        argv = list(options.argv(self.key))
        record = self.record
        assert record is not None
        if options.agent.session_flags:
            argv += ["--session-dir", record.session_dir]
            if record.session_file and os.path.isfile(record.session_file):
                argv += ["--session", record.session_file]
        # A configured workspace wins over the one recorded when the conversation began,
        # so moving a channel to another checkout takes effect at the next agent start.
        chat = options.chat(self.key)
        workspace = chat.workspace if chat and chat.workspace else Path(record.workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        session_dir = Path(record.session_dir)
        session_dir.mkdir(parents=True, exist_ok=True)
        spec = AgentSpec(argv=argv, cwd=workspace, env=dict(options.agent.env))
        return contain(spec, options, self.key, session_dir)

    async def _agent_task(self, *, task_status: TaskStatus[AgentClient]) -> None:
        self._closing = False
        self._agent_done = anyio.Event()
        try:
            with anyio.CancelScope() as scope:
                self._agent_scope = scope
                async with AgentClient(self.spec(), clock=self.s.clock) as agent:
                    self.agent = agent
                    await self.adopt_session(agent)
                    task_status.started(agent)
                    await self._pump(agent)
        finally:
            self.agent = None
            self._agent_scope = None
            self._deadlines.clear()
            self._asked_at.clear()
            self._run_started = None
            self.s.gate.release(self)
            self._agent_done.set()

    async def _pump(self, agent: AgentClient) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._ticker, agent)
            async for event in agent.events:
                self.s.stats.event(event)
                try:
                    await self._on_event(agent, event)
                except Exception:
                    log.exception("conversation %s: event handling failed", self.key)
            tg.cancel_scope.cancel()

    async def _on_event(self, agent: AgentClient, event: AgentEvent) -> None:
        now = self.s.clock()
        self._submit(self.renderer.apply(event, now))
        if isinstance(event, RunStarted):
            self._run_started, self._aborted_for_time = now, False
            self.s.stats.runs_started += 1
        elif isinstance(event, RunEnded):
            self.s.stats.runs_ended += 1
            self._run_started = None
            self.last_active = now
            self.s.gate.changed()
            assert self._tg is not None
            self._tg.start_soon(self._guarded, self.adopt_session, agent)
        elif (
            getattr(event, "type", None) == "extension_ui_request"
            and getattr(event, "method", "") in DIALOG_METHODS
        ):
            await self._dialog_opened(event, now)
        elif isinstance(event, DialogExpired):
            self._deadlines.pop(event.dialog.request.id, None)
            self._asked_at.pop(event.dialog.request.id, None)
            await self.s.store.take_dialog(event.dialog.request.id, self.key)
        elif isinstance(event, CompactionEnd | LegacyCompaction):
            self._release_held()
        elif isinstance(event, AgentGone):
            await self._gone(event)

    async def _dialog_opened(self, event: object, now: float) -> None:
        request_id = str(getattr(event, "id", ""))
        timeout = getattr(event, "timeout", None)
        own = timeout / 1000 if isinstance(timeout, int) and timeout > 0 else None
        self._asked_at[request_id] = now
        if own is None:  # the agent would wait forever: the bridge's own deadline
            self._deadlines[request_id] = now + self.s.options.dialog_timeout
        wall = self.s.wall()
        expires = wall + (own if own is not None else self.s.options.dialog_timeout)
        # An input/editor dialog has no buttons but still needs a claim for take_dialog.
        claims: list[tuple[str, str | None]] = [
            (t, c.label) for t, c in self.renderer.dialog_tokens(request_id)
        ] or [(self.s.tokens(), None)]
        records = [
            DialogRecord(
                token=token,
                key=self.key,
                request_id=request_id,
                method=str(getattr(event, "method", "")),
                title=str(getattr(event, "title", "")),
                choice=label,
                requester=self.record.owner if self.record else None,
                expires_at=expires,
                message_chat=self.chat.chat_id,
                message_thread=self.chat.thread_id,
                message_slot=self.renderer.dialog_slot(request_id),
                created_at=wall,
            )
            for token, label in claims
        ]
        await self.s.store.put_dialogs(records)

    def _release_held(self) -> None:
        held, self._held = self._held, []
        for item in held:
            try:
                self._inbox_send.send_nowait(item)
            except anyio.WouldBlock:
                text = item.intent.text[:80]
                self._submit(self.renderer.notice(f"⚠️ Could not deliver a held message: {text}"))

    async def _gone(self, event: AgentGone) -> None:
        for dialog in await self.s.store.dialogs_for(self.key):
            await self.s.store.take_dialog(dialog.request_id, self.key)
        # Held for a compaction that will never end now: say so rather than lose them
        # silently (sending them on could start the same failure again).
        held, self._held = self._held, []
        if self._closing:
            return
        tail = event.stderr_tail.strip().splitlines()[-1:] if event.stderr_tail else []
        detail = f": {tail[0][:300]}" if tail else ""
        self._submit(
            self.renderer.notice(
                f"⚠️ The agent stopped (exit {event.returncode}){detail}. "
                "Your session is kept; your next message resumes it."
            )
        )
        for item in held:
            quoted = item.intent.text[:80] or "a picture"
            self._submit(self.renderer.notice(f"⚠️ Not sent, please send again: “{quoted}”"))

    async def _ticker(self, agent: AgentClient) -> None:
        while True:
            await anyio.sleep(TICK)
            now = self.s.clock()
            self._submit(self.renderer.tick(now))
            await self._expire_dialogs(agent, now)
            await self._enforce_run_time(agent, now)

    async def _expire_dialogs(self, agent: AgentClient, now: float) -> None:
        for request_id, deadline in list(self._deadlines.items()):
            if now < deadline:
                continue
            del self._deadlines[request_id]
            self._asked_at.pop(request_id, None)
            taken = await self.s.store.take_dialog(request_id, self.key)
            # Whatever became of its claim in the store, an agent still waiting gets its
            # cancel: otherwise it waits until the run-time limit.
            if not taken and request_id not in agent.state.dialogs:
                continue  # answered meanwhile
            await agent.answer_dialog(request_id, cancelled=True)
            minutes = self.s.options.dialog_timeout / 60
            outcome = f"⌛ No answer in {minutes:g} min — cancelled."
            self._submit(self.renderer.close_dialog(request_id, outcome))

    async def _enforce_run_time(self, agent: AgentClient, now: float) -> None:
        started, limit = self._run_started, self.s.options.max_run_time
        if started is None or now - started < limit:
            return
        if not self._aborted_for_time:
            self._aborted_for_time = True
            self.renderer.overtime()
            self._submit(
                self.renderer.notice(f"⏱ The run passed the {limit:g} s limit; stopping it.")
            )
            with anyio.move_on_after(5):
                await agent.abort()
        elif now - started > limit + KILL_AFTER_ABORT and self._agent_scope is not None:
            self._agent_scope.cancel()

    async def adopt_session(self, agent: AgentClient) -> None:
        """Remember the agent's session file, so a respawn resumes it."""
        if agent.profile.is_legacy or self.record is None:
            return
        try:
            state = await agent.get_state()
        except RpcError as exc:
            log.warning("conversation %s: get_state failed: %s", self.key, exc)
            return
        session_file = state.get("sessionFile")
        if isinstance(session_file, str) and session_file != self.record.session_file:
            await self.save(session_file=session_file)

    # --- records and output ------------------------------------------------------------------

    async def _load_record(self) -> ConversationRecord:
        record = await self.s.store.get_conversation(self.key)
        if record is not None:
            return record
        options, now = self.s.options, self.s.wall()
        record = ConversationRecord(
            key=self.key,
            workspace=str(options.workspace(self.key)),
            session_dir=str(options.session_dir(self.key)),
            owner=self._first_sender.id,
            settings=options.settings_of(self.key),
            created_at=now,
            last_active=now,
        )
        await self.s.store.put_conversation(record)
        return record

    async def save(self, **changes: object) -> None:
        assert self.record is not None
        self.record = self.record.model_copy(update={**changes, "last_active": self.s.wall()})
        await self.s.store.put_conversation(self.record)

    async def set_settings(self, settings: ConversationSettings) -> None:
        self.renderer.settings = settings
        await self.save(settings=settings)

    def _submit(self, ops: Sequence[Op]) -> None:
        if ops:
            self.s.outbox.submit(self.key, self.chat, ops)

    def notify(self, text: str) -> None:
        self._submit(self.renderer.notice(text))

    @staticmethod
    def _images(images: Sequence[Image]) -> list[ImageContent]:
        return [
            ImageContent(data=base64.b64encode(i.data).decode("ascii"), mimeType=i.mime_type)
            for i in images
        ]


async def dead_press(
    services: Services,
    key: str,
    chat: ChatRef,
    press: Press | ButtonPress,
    awaited: Callable[[str], bool] = lambda _: False,
) -> None:
    """Answer a press on no live button of conversation `key` "no longer active".

    A press may carry any token (Telegram clients send arbitrary callback data): only
    `key`'s own dialog from before a restart, which no agent `awaited` any more, is
    retired in the store here; another conversation's is not the presser's to end.
    """
    services.outbox.submit(key, chat, [AnswerPress(press.press_id, NO_LONGER_ACTIVE)])
    record = await services.store.get_dialog(press.token)
    if record is None or record.key != key or awaited(record.request_id):
        return
    await services.store.take_dialog(record.request_id, key)


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"

"""One conversation: its parts wired together, its record, and what it shows.

A `Conversation` lives in memory while it is in use; it is what the supervisor and
the control commands see. Each of its parts owns one job: its intake (intake.py:
messages in order, each routed when its turn comes; a press or a stop does not wait,
`deliver`), the intents it carries out (intents.py), what its agent's events mean
beyond what the renderer shows (agent_events.py), its agent's lifetime
(agent_lifetime.py) in its project (bridge/projects/project.py), the agent's dialogs
(dialogs.py) and the approval gate's questions (approval_questions.py), and the
messages that wait: for a busy agent to take them (pending.py), or asked about and
held (busy_asks.py). Each part names what it needs of the conversation in a small
Protocol, so no part imports this module. Once the conversation is quiet
(`quiet_since`) the supervisor lets it go; its lasting state is in the store, so its
next message makes it again as it was.

Invariants: everything shown in the chat goes through the renderer and the outbox;
nothing one conversation does (a crash, a platform error, a press with another's
token) reaches another; a dialog is answered at most once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from bridge.controls import pull_requests
from bridge.conversation.agent_events import AgentEvents
from bridge.conversation.agent_lifetime import AgentLife
from bridge.conversation.approval_questions import Approvals
from bridge.conversation.busy_asks import Waiting
from bridge.conversation.dialogs import Dialogs
from bridge.conversation.intake import Intake
from bridge.conversation.intents import Intents
from bridge.conversation.ledger import Ledger
from bridge.conversation.pending import Queued
from bridge.conversation.plans import Plans
from bridge.projects.project import Projects
from bridge.render import Renderer
from bridge.rpc.errors import AgentExited, RpcError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.conversation.routing import Intent, Reading
    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, ConversationSettings, Op, PlatformLimits, Sender
    from bridge.rpc.agent_event import AgentEvent
    from bridge.rpc.client import AgentClient
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)


class Conversation:
    def __init__(self, key: str, chat: ChatRef, first_sender: Sender, services: Services) -> None:
        self.key = key
        self.chat = chat
        self.services = services
        self._first_sender = first_sender
        self.record: ConversationRecord | None = None
        self.renderer = Renderer(
            limits=services.adapter.limits,
            formatter=services.adapter.format,
            tokens=services.tokens,
            settings=services.options.settings_of(key),
            notify=services.options.notify_of(key),
        )
        self.last_active = services.clock()
        self.waiting = Waiting()  # asked about while the agent works, or held
        self.life = AgentLife(self, services)
        self.dialogs = Dialogs(key, chat, services, self.renderer, lambda: self.record, self.submit)
        self.intents = Intents(self, services)
        self.queued = Queued(self, self.intents.prompt)  # steers and follow-ups not taken yet
        self.plans = Plans(self, services, self.intents.prompt)  # /plan: a plan first
        self.approvals = Approvals(self, services)  # hooks itself into the dialogs
        self.projects = Projects(self, services.options)  # where the agent works
        self.intake = Intake(self, services)
        self.events = AgentEvents(self)
        self.ledger = Ledger(self, services)  # what its runs cost, and their budgets
        self._tg: TaskGroup | None = None
        self._handling = 0  # intents and presses being carried out right now

    # --- lifecycle -------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.record = await self._load_record()
        self.renderer.settings = self.record.settings
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await self.intake.serve()

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
    def handling(self) -> bool:
        """An intent, a press or a follow-up of an event is being carried out."""
        return self._handling > 0

    @property
    def limits(self) -> PlatformLimits:
        return self.services.adapter.limits

    @property
    def max_per_user(self) -> int:
        return self.services.options.max_per_user

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
            and not self.waiting.holding
            and self.intake.empty
            and self.services.outbox.pending(self.key) == 0
            and self.last_active < cutoff
        )

    def close_questions(self) -> bool:
        """Retire the buttons of questions nobody answered (a busy question, a dialog
        of an agent stopped since, a picker); whether there were any."""
        if not self.renderer.has_questions():
            return False
        self.waiting.forget_questions()
        self.submit(self.renderer.close_questions("✖ no longer active"))
        return True

    def close(self) -> None:
        """Leave memory: `run` returns, its inbox being empty (see `quiet_since`)."""
        self.intake.close()

    # --- work ----------------------------------------------------------------------

    def deliver(self, reading: Reading, arrived: float | None = None) -> None:
        """An admitted inbound, as the supervisor read it (`arrived`: when the bridge
        got it); never blocks."""
        self.last_active = self.services.clock()
        urgent = reading.urgent
        if urgent is not None and self._tg is not None:
            # Not behind waiting messages: a stop must reach the run it stops, a press
            # the dialog that is open now.
            self._tg.start_soon(self._at_once, urgent, reading)
            return
        self.intake.put(reading, self.last_active if arrived is None else arrived)

    async def _at_once(self, intent: Intent, reading: Reading) -> None:
        await self.guarded(self.intents.carry_out, intent, reading.inbound)
        self.services.taken(reading.inbound)

    async def guarded(self, handler: Callable[..., Awaitable[None]], *args: object) -> None:
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

    def soon(self, handler: Callable[..., Awaitable[None]], *args: object) -> None:
        """`handler`, guarded, in the conversation's own task group: it outlives the
        intent or event that started it."""
        assert self._tg is not None
        self._tg.start_soon(self.guarded, handler, *args)

    # --- the agent ---------------------------------------------------------------------

    async def ensure_agent(self) -> AgentClient:
        assert self._tg is not None
        return await self.life.ensure(self._tg)

    async def adopt_session(self, agent: AgentClient) -> None:
        await self.life.adopt_session(agent)

    async def on_event(self, agent: AgentClient, event: AgentEvent, now: float) -> None:
        await self.events.handle(agent, event, now)

    async def summary_ready(self, agent: AgentClient) -> None:
        """The run /pr asked for a pull request's text ended: show it to confirm."""
        self.submit(await pull_requests.summarized(self, agent))

    # --- record and output -------------------------------------------------------------

    async def _load_record(self) -> ConversationRecord:
        store = self.services.store
        record = await store.get_conversation(self.key)
        if record is None:
            owner = self._first_sender.id
            record = self.services.options.new_record(self.key, owner, self.services.wall())
            await store.put_conversation(record)
        return record

    async def save(self, **changes: object) -> None:
        assert self.record is not None
        changes["last_active"] = self.services.wall()
        self.record = self.record.model_copy(update=changes)
        await self.services.store.put_conversation(self.record)

    async def set_settings(self, settings: ConversationSettings) -> None:
        self.renderer.settings = settings
        await self.save(settings=settings)

    def submit(self, ops: Sequence[Op]) -> None:
        # A replay's ops are held until it caught up: they go out once, together.
        ops = self.life.hosting.held(ops)
        if ops:
            self.services.outbox.submit(self.key, self.chat, ops)
            self.approvals.mirror(ops)

    def notify(self, text: str) -> None:
        self.submit(self.renderer.notice(text))

    def new_token(self) -> str:
        return self.services.tokens()

"""What an agent event means to its conversation, beyond what the renderer shows.

Every event is shown by the renderer first (but for the approval gate's questions,
which approval_questions.py shows or answers itself) and told to the queue of
messages the agent has not taken yet (pending.py). Then: a run's start and end
set the run-time limit going and stopping (agent_lifetime.py), and at a run's end
the session file is remembered and what waited for the end goes in; a dialog is
recorded so that it is answered at most once (dialogs.py); the end of a compaction
lets held messages go in; and an agent that stopped on its own is reported, with
the messages it will never get.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from bridge.conversation.agent_lifetime import crashed
from bridge.rpc.events import CompactionEnd, LegacyCompaction
from bridge.rpc.signals import AgentGone, DialogExpired, RunEnded, RunStarted
from bridge.rpc.ui import DialogRequest, SelectRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.conversation.agent_lifetime import AgentLife
    from bridge.conversation.approval_questions import Approvals
    from bridge.conversation.busy_asks import Waiting
    from bridge.conversation.dialogs import Dialogs
    from bridge.conversation.intake import Intake
    from bridge.conversation.ledger import Ledger
    from bridge.conversation.pending import Queued
    from bridge.conversation.plans import Plans
    from bridge.model import Op
    from bridge.projects.project import Projects
    from bridge.render import Renderer
    from bridge.rpc.agent_event import AgentEvent
    from bridge.rpc.client import AgentClient


class EventConversation(Protocol):
    """The conversation, as its agent's events reach it."""

    last_active: float
    life: AgentLife
    dialogs: Dialogs
    approvals: Approvals
    plans: Plans  # a plan first (/plan)
    waiting: Waiting  # held messages
    intake: Intake  # where held messages go back to
    ledger: Ledger  # what its runs cost

    @property
    def renderer(self) -> Renderer: ...

    @property
    def queued(self) -> Queued: ...

    @property
    def projects(self) -> Projects: ...

    async def summary_ready(self, agent: AgentClient) -> None: ...

    def soon(self, handler: Callable[..., Awaitable[None]], *args: object) -> None: ...

    async def adopt_session(self, agent: AgentClient) -> None: ...

    def submit(self, ops: Sequence[Op]) -> None: ...

    def notify(self, text: str) -> None: ...


class AgentEvents:
    def __init__(self, conversation: EventConversation) -> None:
        self._conversation = conversation

    async def handle(self, agent: AgentClient, event: AgentEvent, now: float) -> None:
        """One agent event: shown by the renderer, then what else it means here."""
        conversation = self._conversation
        if isinstance(event, SelectRequest) and await conversation.approvals.asked(
            agent, event, now
        ):
            return  # the approval gate's question: shown, or allowed, by approval_questions.py
        conversation.submit(conversation.renderer.apply(event, now))
        conversation.queued.observe(event)
        await conversation.ledger.observe(event)  # usage kept; budgets at tool boundaries
        await conversation.plans.observe(event)
        if isinstance(event, DialogRequest):
            await conversation.dialogs.opened(event, now)
            return
        match event:
            case RunStarted():
                conversation.life.run_started(now)
            case RunEnded():
                conversation.life.run_ended()
                conversation.last_active = now
                conversation.soon(conversation.adopt_session, agent)
                conversation.soon(conversation.queued.run_ended)
                if conversation.projects.summary_wanted:  # /pr asked for this run
                    conversation.soon(conversation.summary_ready, agent)
                await conversation.plans.run_ended()
            case DialogExpired():
                await conversation.dialogs.expired(event)
            case CompactionEnd() | LegacyCompaction():
                conversation.intake.take_back(conversation.waiting.release())
            case AgentGone():
                await self._gone(event)

    async def _gone(self, event: AgentGone) -> None:
        conversation = self._conversation
        await conversation.dialogs.agent_gone()
        conversation.projects.summary_wanted = False  # /pr's question went with the agent
        # Held for a compaction that will never end now: say so rather than lose them
        # silently (sending them on could start the same failure again).
        held = conversation.waiting.release()
        if conversation.life.closing:
            return
        conversation.notify(crashed(event))
        await conversation.plans.agent_gone()
        for item in held:
            text = item.intent.text[:80] or "a picture"
            conversation.notify(f"⚠️ Not sent, please send again: “{text}”")

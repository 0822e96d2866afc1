"""The messages a busy agent has not taken yet: queued, shown with buttons, withdrawn.

Every steer and follow-up for a running agent goes through `Queued.add`;
pending_model.py follows each until the agent takes it, render/queued.py shows it
with [Steer now] and [Cancel] while a press can still change it, and `pressed`
carries a press out.
Only the conversation's owner or an approver may press (dialogs.py); a press on a
message that no longer waits changes nothing.
- An agent with `clear_queue` (0.87.1) gets everything at once. Withdrawing one
  message clears its whole queue (it answers with what it removed) and sends the
  rest back, in order. What it still holds when a run ends would wait for a next
  prompt that may never come (docs/rpc.md, "Steer and follow-up"), so `run_ended` takes
  it back and starts the next run with it.
- One without (0.73.1, the legacy agent) could never give a follow-up back, so the
  bridge holds follow-ups and sends each as the next prompt when a run ends, in
  order, as the agent would have taken it. A steer goes in at once and, since it
  cannot be withdrawn, has no buttons.
After /stop pi keeps its queue for the next run ([f5]); held follow-ups do the same:
they wait for the end of the next run. One lock orders every change of the queue, so
a withdrawal's clear and re-send never interleave with a new message; while it is
held, `queue_update`s (read later than the answers to the commands) take nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.conversation.dialogs import NO_LONGER_ACTIVE, NOT_YOURS
from bridge.conversation.pending_model import (
    IN_AGENT,
    WAITING,
    Event,
    Kind,
    Lineup,
    Status,
    actions,
    requeue,
)
from bridge.conversation.routing import Prompt, Steer
from bridge.files.attachments import as_content
from bridge.model import AnswerPress, React
from bridge.rpc.commands import ClearQueue
from bridge.rpc.content import UserMessage, text_of
from bridge.rpc.events import MessageStart, QueueUpdate
from bridge.rpc.profile import disposition
from bridge.rpc.signals import AgentGone

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.conversation.dialogs import Dialogs
    from bridge.conversation.pending_model import Entry, Removed
    from bridge.conversation.routing import FollowUp, Press
    from bridge.model import Image, Op, Sender
    from bridge.render import QueueChoice, Renderer
    from bridge.render.queued import QueueView
    from bridge.rpc.client import AgentClient
    from bridge.rpc.profile import Disposition

log = logging.getLogger(__name__)

TAKEN = "✔ taken by the agent"
DROPPED = "✖ not sent: the agent stopped"
CLEARED = "✖ cleared with /queue clear"
TOO_LATE = "Too late: the agent has taken it already."
HANDLED = "✔ handled by the agent at once"


class QueueConversation(Protocol):
    """The conversation, as its queue sees it."""

    @property
    def agent(self) -> AgentClient | None: ...

    @property
    def renderer(self) -> Renderer: ...

    @property
    def dialogs(self) -> Dialogs: ...

    def submit(self, ops: Sequence[Op]) -> None: ...


class Queued:
    def __init__(
        self,
        conversation: QueueConversation,
        start: Callable[[Prompt, str | None], Awaitable[None]],
    ) -> None:
        self._conversation = conversation
        self._start = start  # a prompt that starts a run, marking the user's message
        self._lineup = Lineup()
        self._lock = anyio.Lock()
        self._stopped = False  # the run was stopped: the queue waits for the next one

    @property
    def _view(self) -> QueueView:
        return self._conversation.renderer.queued

    # --- from the conversation ------------------------------------------------------

    async def add(self, intent: Steer | FollowUp, message_id: str | None) -> bool:
        """Queue `intent` into the running agent's run; False if no run is on (then it
        is a prompt)."""
        async with self._lock:
            agent = self._conversation.agent
            if agent is None or not agent.state.busy:
                return False
            steer = isinstance(intent, Steer)
            status = Status.STEER if steer else Status.FOLLOW_UP
            if not steer and not agent.profile.clear_queue:
                status = Status.HELD
            entry = self._lineup.add(intent.text, intent.images, message_id, status)
            if status is Status.HELD:
                self._show(entry, self._view.held(message_id))
                return True
            try:
                said = await self._send(agent, entry.kind, entry.text, entry.images)
                log.debug("%s sent to the agent (%s): %s", entry.kind, said, entry.text[:40])
            except BaseException:
                self._lineup.forget(entry)
                raise
            if said == "handled":
                self._handled(entry)
                return True
            self._show(entry, self._conversation.renderer.joined(message_id, intent.text))
        return True

    def _handled(self, entry: Entry) -> None:
        """1.x took it at once (an extension did): no user message will show it taken."""
        self._settle(entry, Event.TAKE, HANDLED)
        message = entry.message_id
        self._conversation.submit([React(message, "done")] if message else [])

    def stopped(self) -> None:
        """The run is being stopped: what waits, waits for the end of the next run."""
        self._stopped = True

    def observe(self, event: object) -> None:
        """An agent event: which entries it shows taken, or lost with the agent."""
        agent = self._conversation.agent
        match event:
            case QueueUpdate() if agent is not None and not self._lock.locked():
                # Read the queue as it is now: the event may be older than a clear and
                # re-send under the lock (the stream lags), which would take all.
                taken = self._lineup.listed(agent.state.steering, agent.state.follow_up)
            case MessageStart(message=UserMessage() as message):
                heard = self._lineup.heard(text_of(message.content))
                taken = [heard] if heard is not None else []
            case AgentGone():
                self._stopped = False
                for entry in self._lineup.waiting():
                    self._settle(entry, Event.GONE, DROPPED)
                return
            case _:
                return
        for entry in taken:
            self._settle(entry, Event.TAKE, TAKEN)

    async def run_ended(self) -> None:
        """A run is over: what waited for its end goes in now, unless it was stopped."""
        async with self._lock:
            stopped, self._stopped = self._stopped, False
            agent = self._conversation.agent
            left = agent.state.steering if agent is not None and not agent.state.busy else ()
            if left and agent is not None and not agent.profile.clear_queue:
                # Nothing takes these back: they wait in the agent for its next prompt.
                log.warning("a run ended with %d steer(s) left in the agent's queue", len(left))
            if stopped or agent is None or not agent.alive or agent.state.busy:
                return  # another run is on already (a prompt, the legacy agent's queue)
            if agent.profile.clear_queue:
                await self._take_back(agent)
            else:
                await self._next_held(agent)

    async def pressed(self, press: Press, choice: QueueChoice, sender: Sender) -> None:
        if not self._conversation.dialogs.may_answer(sender):
            self._answer(press, NOT_YOURS, alert=True)
            return
        event = Event.PUSH if choice.action == "steer_now" else Event.CANCEL
        async with self._lock:
            entry = self._lineup.get(choice.entry_id)
            agent = self._conversation.agent
            if entry is None or choice.action not in actions(entry.status, _withdraws(agent)):
                self._answer(press, NO_LONGER_ACTIVE)
                return
            by = sender.name or sender.id
            if entry.status is Status.HELD:
                answer = await self._unhold(agent, entry, event, by)
            else:
                assert agent is not None  # `actions` offers nothing in its queue without one
                answer = await self._withdraw(agent, entry, event, by)
        self._answer(press, answer)

    # --- /queue ---------------------------------------------------------------------

    def listing(self) -> list[Op]:
        entries = self._lineup.waiting()
        if not entries:
            return self._conversation.renderer.notice("Nothing is queued.")
        return self._view.listing([e.id for e in entries])

    async def clear(self) -> list[Op]:
        async with self._lock:
            agent = self._conversation.agent
            held = self._lineup.waiting(Status.HELD)
            for entry in held:
                self._settle(entry, Event.CANCEL, CLEARED)
            if agent is not None and agent.alive and agent.profile.clear_queue:
                for item in await self._clear(agent):
                    if item.entry is not None:
                        self._settle(item.entry, Event.CANCEL, CLEARED)
                return self._conversation.renderer.notice("🧹 Queue cleared.")
        if self._lineup.waiting(*IN_AGENT):
            sent = "" if not held else "🧹 Held messages cleared. "
            return self._conversation.renderer.notice(
                f"{sent}This agent cannot withdraw its steers."
            )
        return self._conversation.renderer.notice(
            "🧹 Queue cleared." if held else "Nothing is queued."
        )

    # --- presses ---------------------------------------------------------------------

    async def _unhold(self, agent: AgentClient | None, entry: Entry, event: Event, by: str) -> str:
        """A press on a follow-up the bridge holds: it never reached the agent."""
        if event is Event.CANCEL:
            self._settle(entry, event, f"✖ cancelled by {by}")
            return "Cancelled."
        if agent is None or not agent.state.busy:  # the run ended: it starts the next
            self._settle(entry, Event.TAKE, TAKEN)
            await self._start(Prompt(entry.text, entry.images), entry.message_id)
            return "Sent now."
        said = await self._send(agent, "steer", entry.text, entry.images)
        self._lineup.move(entry, event)
        if said == "handled":
            self._handled(entry)
            return "Sent now."
        self._show(entry, self._conversation.renderer.joined(entry.message_id, entry.text))
        return "Sent now."

    async def _withdraw(self, agent: AgentClient, entry: Entry, event: Event, by: str) -> str:
        """A press on a message in the agent's queue: the queue comes back whole, and all
        but `entry` go in again, `entry` as a steer if pushed."""
        removed = await self._clear(agent)
        late = entry.status not in WAITING  # taken before the clear reached the agent
        if late:
            event = Event.CANCEL  # of nothing: the others go back as they were
        elif event is Event.CANCEL:
            self._settle(entry, event, f"✖ cancelled by {by}")
        else:
            self._lineup.move(entry, event)
        for item in requeue(removed, entry, event):
            await self._resend(agent, item)
        self._show(entry)
        if late:
            return TOO_LATE
        return "Cancelled." if event is Event.CANCEL else "Sent now."

    # --- the agent's queue ----------------------------------------------------------

    async def _take_back(self, agent: AgentClient) -> None:
        """The run ended with messages still in the idle agent's queue (a withdrawal put
        them back just as it ended, or it failed): the first starts the next run, the
        rest join it. Those it no longer has, it took."""
        if self._lineup.waiting(*IN_AGENT):
            for item in await self._clear(agent):
                await self._resend(agent, item)

    async def _next_held(self, agent: AgentClient) -> None:
        """The first follow-up the bridge holds starts the next run."""
        # The agent's last queue_update is final now: what it does not list, it took.
        for entry in self._lineup.listed(agent.state.steering, agent.state.follow_up, settled=True):
            self._settle(entry, Event.TAKE, TAKEN)
        held = self._lineup.waiting(Status.HELD)
        if held:
            self._settle(held[0], Event.TAKE, TAKEN)
            await self._start(Prompt(held[0].text, held[0].images), held[0].message_id)

    async def _clear(self, agent: AgentClient) -> list[Removed]:
        """Empty the agent's queue: what it removed, matched to the entries; those it
        did not have any more it has taken."""
        for entry in self._lineup.waiting(*IN_AGENT):
            entry.seen = False  # the clear's own queue_update lists nothing: no take
        response = await agent.request(ClearQueue())
        data = response.data if isinstance(response.data, dict) else {}
        removed, missing = self._lineup.removed(
            _texts(data.get("steering")), _texts(data.get("followUp"))
        )
        for entry in missing:
            self._settle(entry, Event.TAKE, TAKEN)
        return removed

    async def _resend(self, agent: AgentClient, item: Removed) -> None:
        """Put a removed message back; if the run ended meanwhile, it starts the next."""
        entry = item.entry
        if entry is not None and entry.status not in WAITING:
            return
        images = entry.images if entry is not None else ()
        if agent.state.busy:
            await self._send(agent, item.kind, item.text, images)
            return
        if entry is not None:
            self._settle(entry, Event.TAKE, TAKEN)
        await self._start(Prompt(item.text, images), entry.message_id if entry else None)

    async def _send(
        self, agent: AgentClient, kind: Kind, text: str, images: tuple[Image, ...]
    ) -> Disposition | None:
        """Into the agent's queue; what became of it where the agent says (1.x)."""
        if kind == "steer":
            return disposition(await agent.steer(text, as_content(images)))
        return disposition(await agent.follow_up(text, as_content(images)))

    # --- the chat ----------------------------------------------------------------------

    def _show(self, entry: Entry, ops: Sequence[Op] = ()) -> None:
        out = list(ops)
        if entry.status in WAITING:
            offered = actions(entry.status, _withdraws(self._conversation.agent))
            out += self._view.waiting(entry.id, entry.text, entry.status is Status.STEER, offered)
        self._conversation.submit(out)

    def _settle(self, entry: Entry, event: Event, outcome: str) -> None:
        if not self._lineup.move(entry, event):
            return
        withdrawn = entry.status in (Status.CANCELLED, Status.DROPPED)
        message = entry.message_id if withdrawn else None
        self._conversation.submit(self._view.close(entry.id, entry.text, outcome, message))

    def _answer(self, press: Press, text: str, *, alert: bool = False) -> None:
        self._conversation.submit([AnswerPress(press.press_id, text, alert=alert)])


def _withdraws(agent: AgentClient | None) -> bool:
    """Whether the agent can give back what is in its queue (`clear_queue`)."""
    return agent is not None and agent.profile.clear_queue


def _texts(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []

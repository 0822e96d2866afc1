"""What a conversation does for each intent routing.py decides on, and for each press
of its buttons.

A prompt starts a run and marks the user's message as being worked on; a steer or a
follow-up goes to the running agent through the queue of messages it has not taken
yet (pending.py), or starts a run when none is on; a busy question (policy "ask") and
a message held for a compaction wait in busy_asks.py; /stop drops what waits and
aborts; a control command is the command registry's (bridge/controls/). A press is
told apart by what its token opened: the run's [Stop], a busy question, an agent
dialog (dialogs.py), a queued message's buttons, or a picker of a control command.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from bridge.controls import handlers
from bridge.controls.handling import Asker, NotYours
from bridge.controls.target import Target
from bridge.conversation.busy_asks import Asked
from bridge.conversation.dialogs import NOT_YOURS
from bridge.conversation.ledger import RAISE
from bridge.conversation.routing import (
    AskBusy,
    Control,
    DialogReply,
    FollowUp,
    Hold,
    Ignore,
    Press,
    Prompt,
    Steer,
    Stop,
)
from bridge.files.attachments import as_content
from bridge.model import AnswerPress, Mention
from bridge.render import BusyChoice, DialogChoice, PickerChoice, QueueChoice, StopChoice

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.conversation.busy_asks import Waiting
    from bridge.conversation.dialogs import Dialogs
    from bridge.conversation.ledger import Ledger
    from bridge.conversation.pending import Queued
    from bridge.conversation.plans import Plans
    from bridge.conversation.routing import Intent
    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, Inbound, Op, Sender

log = logging.getLogger(__name__)

COMPACTING = "⏸ The agent is compacting its context; your message goes in when it is done."


class IntentConversation(Target, Protocol):
    """The conversation, as the intents it carries out see it (and as its control
    commands do: `Target`)."""

    key: str
    chat: ChatRef
    dialogs: Dialogs
    waiting: Waiting  # busy questions and held messages
    ledger: Ledger  # who starts a run, and whether their budget lets it
    plans: Plans

    @property
    def queued(self) -> Queued: ...

    def submit(self, ops: Sequence[Op]) -> None: ...


class Intents:
    def __init__(self, conversation: IntentConversation, services: Services) -> None:
        self._conversation = conversation
        self._services = services

    async def carry_out(self, intent: Intent, inbound: Inbound) -> None:
        if inbound.press is None:
            self._conversation.ledger.heard(inbound)  # a run it starts spends their budget
        await self._carry_out(intent, inbound)

    async def _carry_out(self, intent: Intent, inbound: Inbound) -> None:
        conversation = self._conversation
        message_id = inbound.message_id
        match intent:
            case Prompt():
                await self._prompt_or_plan(intent, inbound)
            case Steer() | FollowUp():
                await self.queue(intent, message_id, inbound.sender)
            case AskBusy():
                self._ask(intent, message_id)
            case Hold():
                conversation.waiting.hold(intent.then, message_id)
                conversation.notify(COMPACTING)
            case Stop():
                await self.stop()
            case Press():
                await self._press(intent, inbound)
            case DialogReply():
                await conversation.dialogs.replied(conversation.agent, intent, inbound.sender)
            case Control():
                asker = self._asker(inbound.sender)
                ops = await handlers.run(conversation, intent.name, intent.arg, asker)
                conversation.submit(ops)
            case Ignore():
                log.debug("conversation %s: ignored (%s)", conversation.key, intent.reason)

    async def prompt(
        self, intent: Prompt, message_id: str | None, sender: Sender | None = None
    ) -> None:
        """Start a run; the user's message shows it is being worked on until it ends."""
        conversation = self._conversation
        running = conversation.agent is not None and conversation.agent.state.busy
        if not running and await conversation.ledger.refused(message_id):
            return  # a budget is used up: said so in the chat
        agent = await conversation.ensure_agent()
        person = Mention(sender.id, sender.name) if sender is not None else None
        conversation.submit(conversation.renderer.working_on(message_id, person))
        if not agent.state.busy:
            await conversation.projects.before_run()  # the run's changed files count from here
        log.debug("conversation %s: prompts agent %d", conversation.key, agent.pid)
        try:
            await agent.prompt(intent.text, as_content(intent.images))
        except BaseException:
            conversation.submit(conversation.renderer.not_started())
            raise

    async def _prompt_or_plan(self, intent: Prompt, inbound: Inbound) -> None:
        """A plan's revision, a task to plan first (plans.py), or else a run."""
        if not await self._conversation.plans.prompted(intent, inbound):
            await self.prompt(intent, inbound.message_id, inbound.sender)

    async def queue(
        self, intent: Steer | FollowUp, message_id: str | None, sender: Sender | None = None
    ) -> None:
        """Into the running agent's run; with no run on, it starts one."""
        if not await self._conversation.queued.add(intent, message_id):
            await self.prompt(Prompt(intent.text, intent.images), message_id, sender)

    async def stop(self) -> None:
        conversation = self._conversation
        agent = conversation.agent
        if agent is None or not agent.state.busy:
            conversation.notify("Nothing is running.")
            return
        conversation.waiting.release()  # a stop drops held messages too
        conversation.queued.stopped()
        await agent.abort()

    def _ask(self, intent: AskBusy, message_id: str | None) -> None:
        """Busy policy "ask": [Steer now] [After this run] under the message's start."""
        conversation = self._conversation
        pending_id = self._services.tokens()
        conversation.waiting.ask(pending_id, Asked(intent.text, intent.images, message_id))
        conversation.submit(conversation.renderer.ask_busy(pending_id, intent.text[:200]))

    # --- presses -----------------------------------------------------------------------

    async def _press(self, press: Press, inbound: Inbound) -> None:
        conversation = self._conversation
        sender = inbound.sender
        message = inbound.press.message if inbound.press is not None else None
        if await conversation.plans.pressed(press, sender, message):
            return  # the buttons of a plan (plans.py)
        match conversation.renderer.pressed(press.token):
            case StopChoice():
                conversation.submit([AnswerPress(press.press_id, "Stopping…")])
                await self.stop()
            case BusyChoice() as choice:
                await self._busy_choice(press, choice)
            case DialogChoice() as choice:
                await conversation.dialogs.chosen(conversation.agent, press, choice, sender)
            case QueueChoice() as choice:
                await conversation.queued.pressed(press, choice, sender)
            case PickerChoice() as choice if choice.kind == RAISE:
                await conversation.ledger.raise_pressed(press, choice, sender)
            case PickerChoice() as choice:
                await self._picked(press, choice, sender)
            case None:
                await conversation.dialogs.stale(conversation.agent, press, sender)

    async def _busy_choice(self, press: Press, choice: BusyChoice) -> None:
        conversation = self._conversation
        asked = conversation.waiting.answered(choice.pending_id)
        if asked is None:
            await conversation.dialogs.stale(conversation.agent, press)
            return
        later = choice.mode == "follow_up"
        answer = "Queued for after this run." if later else "Sent now."
        conversation.submit([AnswerPress(press.press_id, answer)])
        outcome = "⏭ after this run" if later else "➡️ sent now"
        conversation.submit(conversation.renderer.close_busy(choice.pending_id, outcome))
        await self.queue(asked.as_intent(later), asked.message_id)

    async def _picked(self, press: Press, choice: PickerChoice, sender: Sender) -> None:
        """A control command's picker (/model, /sessions, …): closed, then carried out;
        a guarded one (/pr's) only for the owner or an approver. One that must know
        who pressed is carried out first: a press it refuses leaves the picker open."""
        conversation = self._conversation
        found = handlers.HANDLERS.picker(choice.kind)
        if found is not None and found[1].guarded and not conversation.dialogs.may_answer(sender):
            conversation.submit([AnswerPress(press.press_id, NOT_YOURS, alert=True)])
            return
        asker = self._asker(sender)
        ops: list[Op] | None = None
        if handlers.personal(choice.kind):
            try:
                ops = await handlers.pick(conversation, choice.kind, choice.value, asker)
            except NotYours as refused:
                conversation.submit([AnswerPress(press.press_id, str(refused), alert=True)])
                return
        conversation.submit([AnswerPress(press.press_id, "✓")])
        conversation.submit(conversation.renderer.close_picker(choice.picker_id, choice.outcome))
        if ops is None:
            ops = await handlers.pick(conversation, choice.kind, choice.value, asker)
        conversation.submit(ops)

    def _asker(self, sender: Sender) -> Asker:
        conversation, services = self._conversation, self._services
        return Asker(
            sender,
            conversation.key,
            conversation.chat,
            services.store,
            services.options,
            services.wall,
        )

"""Plan first: /plan <task> (or every message, with a chat's `plan_first`) makes the
agent write a plan before it may change anything; the person then executes it,
revises it or cancels it.

The phases live in the conversation's record (`PlanRecord`), so a frontend and a
worker see the same plan and a restart keeps it: "planning" (the agent writes the
plan), "ready" (the plan's message shows [▶ Execute] [✏ Revise…] [✖ Cancel]),
"revising" (the person's next message, or the text typed in the button's form where
the platform has forms, is the change asked for) and "executing" (the plan's run).
Until Execute the conversation is read-only: the approval gate
(bridge/extensions/approval-gate.ts) asks the bridge about every tool call but pi's
read-only ones, and `refusal` answers each with a refusal the model sees. The mode is
the bridge's own state, given to the gate only as an answer on pi's stdin, so
nothing the agent runs can turn it off (docs/security.md, "Plan first").

The plan's message lists its steps as a checklist (bridge/plans/steps.py); while it
runs, each "Step N done" the agent writes ticks step N in the message. Only the
owner or an approver presses the buttons; a press on a plan no longer live is
answered "no longer active" by the dialogs, as any dead button is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from bridge.conversation.dialogs import NOT_YOURS
from bridge.conversation.routing import Prompt
from bridge.identity import fresh_id
from bridge.model import AnswerPress, Button, Edit, Form, Send, Task
from bridge.plans import prompts
from bridge.plans.steps import checklist, steps, ticked
from bridge.platform import Streaming
from bridge.render.textbits import clip
from bridge.rpc.content import AssistantMessage, text_of
from bridge.rpc.events import MessageEnd
from bridge.store.records import PlanRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.approvals import ApprovalAsk
    from bridge.conversation.dialogs import Dialogs
    from bridge.conversation.routing import Press
    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, Inbound, MessageRef, Op, Sender
    from bridge.render import Renderer
    from bridge.rpc.agent_event import AgentEvent
    from bridge.rpc.client import AgentClient
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

READ_ONLY = frozenset(prompts.READ_ONLY_TOOLS)
CARD_CHARS = 120  # of a step's task card title
PLAN_CHARS = 3000  # of a plan without a list, as its message shows it
BUSY = "The agent is working; wait for it, or /stop it first."
NO_GATE = "This agent cannot keep a plan read-only (it loads no extensions), so /plan is off."
REVISE_FORM = Form("What should change in the plan?", multiline=True)
ASK_REVISION = "✏ Reply with what should change in the plan; I will plan again."
UNFINISHED = "⚠️ The plan was not finished; /plan again, or /plan cancel."
USAGE = "/plan <task> writes a plan first; /plan shows the plan; /plan cancel ends it."


def refusal(record: ConversationRecord | None, ask: ApprovalAsk) -> str | None:
    """Why the gate's call `ask` is refused (a plan is being made and the tool is not
    read-only); None when plan mode has nothing against it."""
    plan = record.plan if record is not None else None
    if plan is None or plan.phase == "executing" or ask.tool in READ_ONLY:
        return None
    # `bash` too: the policy proves where a command writes, never that it writes
    # nothing, so no command counts as read-only (docs/commands.md "Plan first").
    return prompts.refused(ask.tool)


class PlanConversation(Protocol):
    """The conversation, as its plans see it."""

    key: str
    chat: ChatRef
    dialogs: Dialogs

    @property
    def renderer(self) -> Renderer: ...

    @property
    def record(self) -> ConversationRecord | None: ...

    @property
    def busy(self) -> bool: ...

    @property
    def agent(self) -> AgentClient | None: ...

    def submit(self, ops: Sequence[Op]) -> None: ...

    def notify(self, text: str) -> None: ...

    async def save(self, **changes: object) -> None: ...


class Plans:
    def __init__(
        self,
        conversation: PlanConversation,
        services: Services,
        prompt: Callable[[Prompt, str | None], Awaitable[None]],
    ) -> None:
        self._conversation = conversation
        self.services = services
        self._prompt = prompt  # starts a run, as a message does (intents.py)
        self._said = ""  # the newest assistant text of the run on now
        self._posted: set[str] = set()  # plan messages this process has sent
        self._cards: set[int] = set()  # steps shown as cards in this run's stream
        self._cancelling = False  # /plan cancel stops the run making the plan

    @property
    def plan(self) -> PlanRecord | None:
        record = self._conversation.record
        return record.plan if record is not None else None

    # --- starting --------------------------------------------------------------------

    async def command(self, arg: str) -> list[Op]:
        """/plan <task>, /plan (what the plan is at) and /plan cancel."""
        word = arg.strip()
        if word.lower() == "cancel":
            return await self._cancel() if self.plan else self._note("No plan to cancel.")
        if not word:
            plan = self.plan
            return self._note(f"📝 Plan ({plan.phase}): {plan.task}" if plan else USAGE)
        if self._conversation.busy:  # /plan cancel may stop a plan being made, not this
            return self._note(BUSY)
        await self.start(word, None)
        return []

    async def start(self, task: str, message_id: str | None) -> None:
        """Plan `task` read-only first (a plan not carried out yet is replaced)."""
        conversation = self._conversation
        if not self.services.options.agent.session_flags:
            conversation.notify(NO_GATE)
            return
        old = self.plan
        if old is not None and old.phase != "executing":
            conversation.submit(self._closed(old, "↪ replaced by a new plan"))
        record = conversation.record
        by = record.owner if record is not None and record.owner else ""
        plan = PlanRecord(phase="planning", task=task, by=by, slot=f"plan:{fresh_id()}")
        await conversation.save(plan=plan)
        self.services.stats.plans["started"] += 1
        conversation.notify(f"📝 Planning first, read-only: {clip(task, 300)}")
        await self._run(prompts.planning(task), message_id)

    async def prompted(self, intent: Prompt, inbound: Inbound) -> bool:
        """A message that would start a run: the revision asked for, or (with the
        chat's `plan_first`) a task to plan; False when it is just a message."""
        plan = self.plan
        if (
            plan is not None
            and plan.phase == "revising"
            and intent.text
            and self._conversation.dialogs.may_answer(inbound.sender)
        ):
            await self._revise(plan, intent.text, inbound.message_id)
            return True
        chat = self.services.options.chat(self._conversation.key)
        if plan is None and chat is not None and chat.plan_first and intent.text:
            await self.start(intent.text, inbound.message_id)
            return True
        return False

    # --- the buttons -------------------------------------------------------------------

    async def pressed(self, press: Press, sender: Sender, message: MessageRef | None) -> bool:
        """A press on the live plan's buttons is carried out; False: not one of them."""
        plan = self.plan
        action = plan.tokens.get(press.token) if plan is not None else None
        if plan is None or action is None:
            return False
        conversation = self._conversation
        if not conversation.dialogs.may_answer(sender):
            conversation.submit([AnswerPress(press.press_id, NOT_YOURS, alert=True)])
            return True
        if action != "cancel" and conversation.busy:
            conversation.submit([AnswerPress(press.press_id, BUSY, alert=True)])
            return True
        if message is not None and self.services.outbox.ref(conversation.key, plan.slot) is None:
            # A message an earlier process posted: edit it rather than post it again.
            self.services.outbox.adopt(conversation.key, plan.slot, message)
        who = sender.name or sender.id
        match action:
            case "execute":
                conversation.submit([AnswerPress(press.press_id, "▶ Executing")])
                await self._execute(plan, who)
            case "revise":
                conversation.submit([AnswerPress(press.press_id, "✏ Revise")])
                await self._revise_asked(plan, press.text, who)
            case _:
                conversation.submit([AnswerPress(press.press_id, "✖ Cancelled")])
                conversation.submit(await self._cancel(who))
        return True

    async def _execute(self, plan: PlanRecord, who: str) -> None:
        executing = plan.model_copy(update={"phase": "executing", "tokens": {}, "done": []})
        await self._conversation.save(plan=executing)
        self.services.stats.plans["executed"] += 1
        self._conversation.submit(self._shown(executing, f"▶ {who} chose: Execute"))
        await self._run(prompts.executing(plan.text), None)

    async def _revise_asked(self, plan: PlanRecord, typed: str | None, who: str) -> None:
        if typed is not None and typed.strip():
            await self._revise(plan, typed.strip(), None)
            return
        # No form on this platform (or an empty one): the person's next message.
        tokens = {self.services.tokens(): "cancel"}
        revising = plan.model_copy(update={"phase": "revising", "tokens": tokens})
        await self._conversation.save(plan=revising)
        self._conversation.submit(self._shown(revising, f"✏ {who} asked to revise it"))
        self._conversation.notify(ASK_REVISION)

    async def _revise(self, plan: PlanRecord, revision: str, message_id: str | None) -> None:
        closed = self._closed(plan, f"✏ revised: {clip(revision, 300)}")
        self._conversation.submit(closed)
        again = PlanRecord(
            phase="planning",
            task=plan.task,
            by=plan.by,
            slot=f"plan:{fresh_id()}",
            text=plan.text,
            rounds=plan.rounds,
        )
        await self._conversation.save(plan=again)
        self.services.stats.plans["revised"] += 1
        await self._run(prompts.revising(plan.text, revision), message_id)

    async def _cancel(self, who: str = "") -> list[Op]:
        plan = self.plan
        if plan is None:
            return []
        agent = self._conversation.agent
        if plan.phase == "planning" and agent is not None and agent.state.busy:
            # Its tools would be back with the plan gone: the run being planned stops
            # first, refused all the while, and its end shows no plan.
            self._cancelling = True
            await agent.abort()
        await self._conversation.save(plan=None)
        self.services.stats.plans["cancelled"] += 1
        if plan.phase == "planning":  # no plan's message yet: say it on its own
            return self._note(f"✖ Plan cancelled: {clip(plan.task, 300)}")
        return self._closed(plan, f"✖ {who} cancelled it" if who else "✖ cancelled")

    # --- the agent's side ----------------------------------------------------------------

    async def observe(self, event: AgentEvent) -> None:
        """Remember what the agent says; while a plan runs, its "Step N done" lines
        tick the checklist."""
        if not isinstance(event, MessageEnd) or not isinstance(event.message, AssistantMessage):
            return
        said = text_of(event.message.content).strip()
        if not said:
            return
        self._said = said
        plan = self.plan
        if plan is None or plan.phase != "executing" or not plan.steps:
            return
        done = sorted(set(plan.done) | ticked(said, len(plan.steps)))
        if done != plan.done:
            plan = plan.model_copy(update={"done": done})
            await self._conversation.save(plan=plan)
            self._conversation.submit(self._shown(plan))
            self._conversation.submit(self._step_cards(plan))

    async def run_ended(self) -> None:
        """A run ended: a plan being made is shown with its buttons; a plan carried
        out is over."""
        said, self._said = self._said, ""
        plan = self.plan
        if plan is None:
            return
        if plan.phase == "planning" and not self._cancelling:
            await self._ready(plan, said)
        elif plan.phase == "executing":
            await self._conversation.save(plan=None)
            ticks = f"{len(plan.done)} of {len(plan.steps)} steps ticked" if plan.steps else ""
            end = "🏁 the plan's run is over" + (f" ({ticks})" if ticks else "")
            self._conversation.submit(self._shown(plan, end, over=True))

    async def agent_gone(self) -> None:
        """The agent stopped on its own: a plan's run is over; a plan being made
        waits (still read-only) for /plan again or /plan cancel."""
        self._said = ""
        plan = self.plan
        if plan is None:
            return
        if plan.phase == "executing":
            await self._conversation.save(plan=None)
            end = "⚠️ the agent stopped before the plan's run ended"
            self._conversation.submit(self._shown(plan, end, over=True))
        elif plan.phase == "planning":  # a plan cut short is not shown as one
            self._conversation.notify(UNFINISHED)

    async def _ready(self, plan: PlanRecord, said: str) -> None:
        text = said or plan.text
        if not text:
            self._conversation.notify(UNFINISHED)
            return
        tokens = {self.services.tokens(): action for action in ("execute", "revise", "cancel")}
        ready = plan.model_copy(
            update={
                "phase": "ready",
                "text": text,
                "steps": steps(text),
                "tokens": tokens,
                "rounds": plan.rounds + 1,
            }
        )
        await self._conversation.save(plan=ready)
        self._conversation.submit(self._shown(ready))

    async def _run(self, text: str, message_id: str | None) -> None:
        self._said, self._cards, self._cancelling = "", set(), False
        await self._prompt(Prompt(text), message_id)

    def _step_cards(self, plan: PlanRecord) -> list[Op]:
        """Where the chat streams the run (Slack), each step ticked also as a task card
        in the run's stream, complete. A step not done yet has no card: cards know
        no "pending", and one left "in progress" would outlive the run's stream. None
        where the chat does not stream: the plan's message shows the ticks everywhere."""
        adapter, run = self.services.adapter, self._conversation.renderer.live_run
        if not run or not isinstance(adapter, Streaming):
            return []
        if not adapter.streams_in(self._conversation.chat):
            return []
        ops: list[Op] = []
        for number in plan.done:
            if number in self._cards or not 1 <= number <= len(plan.steps):
                continue
            self._cards.add(number)
            step = plan.steps[number - 1]
            slot = f"{plan.slot}:step{number}"
            task = Task(slot, clip(f"{number}. {step}", CARD_CHARS), "complete")
            ops.append(Send(slot, f"☑ {number}. {step}", run=run, task=task))
        return ops

    # --- the plan's message --------------------------------------------------------------

    def _shown(self, plan: PlanRecord, outcome: str = "", *, over: bool = False) -> list[Op]:
        """The plan's message as `plan` is now (posted on its first showing)."""
        heads = {
            "planning": "📝 *Planning*",
            "ready": "📝 *Plan*",
            "revising": "📝 *Plan* (to revise)",
            "executing": "🏁 *Plan carried out*" if over else "▶ *Executing the plan*",
        }
        body = checklist(plan.steps, plan.done) if plan.steps else clip(plan.text, PLAN_CHARS)
        lines = [f"{heads[plan.phase]}: {clip(plan.task, 300)}", "", body]
        if outcome:
            lines += ["", outcome]
        return self._op(plan.slot, "\n".join(lines), self._buttons(plan))

    def _closed(self, plan: PlanRecord, outcome: str) -> list[Op]:
        """The plan's message without buttons (none if it was never shown)."""
        if plan.phase == "planning":
            return []
        body = checklist(plan.steps, plan.done) if plan.steps else clip(plan.text, PLAN_CHARS)
        text = f"📝 *Plan*: {clip(plan.task, 300)}\n\n{body}\n\n{outcome}"
        return self._op(plan.slot, text, ())

    def _buttons(self, plan: PlanRecord) -> tuple[tuple[Button, ...], ...]:
        labels = {"execute": "▶ Execute", "revise": "✏ Revise…", "cancel": "✖ Cancel"}
        row = tuple(
            Button(labels[action], token, REVISE_FORM if action == "revise" else None)
            for token, action in plan.tokens.items()
        )
        return (row,) if row else ()

    def _op(self, slot: str, markdown: str, buttons: tuple[tuple[Button, ...], ...]) -> list[Op]:
        adapter = self.services.adapter
        limits = adapter.limits
        chunks = adapter.format(clip(markdown, limits.max_text), limits.max_text)
        if not chunks:
            return []
        known = self.services.outbox.ref(self._conversation.key, slot) is not None
        if known or slot in self._posted:
            return [Edit(slot, chunks[0], markdown, "formatted", buttons)]
        self._posted.add(slot)
        return [Send(slot, chunks[0], markdown, "formatted", buttons)]

    def _note(self, text: str) -> list[Op]:
        self._conversation.notify(text)
        return []

"""A conversation's spend: the usage its agent reports, kept once in the store, and its
budgets applied (the decisions are `bridge/spend/limits.py`'s).

- **Who pays.** A run spends the budget of the person whose message started it
  (`heard` learns who sent each message; the record's `run_by` keeps it, so a
  reattached run or one taken over by another worker still knows).
- **Recorded once.** Each assistant message's usage is one `UsageEntry`, keyed by the
  message (`usage.message_id`): a replay after a reattach, or a redelivery, finds it
  kept and adds nothing; the metrics count only what was new.
- **Refused, stopped, warned.** A message that would start a run while its person's
  or its chat's daily or monthly limit is reached is refused, with the spend and the
  limit and, where the chat has approvers, a [Raise today's limit] button. A running
  run is stopped at its next tool boundary (a `tool_execution_start`) once a limit,
  its own per-run cap included, is reached: aborted as /stop does, and told why. At
  80 % of a limit the chat is told once (the store's `seen` decides "once", over
  every worker).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

from bridge.conversation.unsaved_usage import UnsavedUsage
from bridge.model import AnswerPress
from bridge.render import PickerOption
from bridge.rpc.content import AssistantMessage
from bridge.rpc.events import MessageEnd, ToolExecutionStart
from bridge.rpc.signals import RunStarted
from bridge.spend.limits import Standing, decide, raise_amount
from bridge.spend.periods import periods
from bridge.spend.report import Row, money, usage_table
from bridge.spend.usage import chat_name, entry_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.conversation.routing import Press
    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, Inbound, Op, Sender
    from bridge.render import PickerChoice, Renderer
    from bridge.rpc.agent_event import AgentEvent
    from bridge.spend.limits import Decision, Kind, Limits, Moment, Reading, Scope
    from bridge.spend.periods import Periods
    from bridge.spend.usage import UsageEntry, UsageScope
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

RAISE = "budget-raise"  # the picker kind of [Raise today's limit]
WARNED_TTL = 40 * 24 * 3600.0  # a warning's key outlives its month
SENDERS = 256  # messages whose senders are remembered until their run starts


class Stopping(Protocol):
    async def stop(self) -> None:
        """Stop the run as /stop does."""


class LedgerConversation(Protocol):
    """The conversation, as its spend sees it."""

    key: str
    chat: ChatRef

    @property
    def intents(self) -> Stopping: ...

    @property
    def record(self) -> ConversationRecord | None: ...

    @property
    def owner(self) -> str: ...

    @property
    def renderer(self) -> Renderer: ...

    def submit(self, ops: Sequence[Op]) -> None: ...

    def notify(self, text: str) -> None: ...

    def soon(self, handler: Callable[..., Awaitable[None]], *args: object) -> None: ...

    async def save(self, **changes: object) -> None: ...


class Ledger:
    def __init__(self, conversation: LedgerConversation, services: Services) -> None:
        self._conversation = conversation
        self._services = services
        self._budgets = services.options.budgets
        self._senders: OrderedDict[str, Sender] = OrderedDict()  # message id → sender
        self._names: dict[str, str] = {}  # user id → display name
        self.asking: Sender | None = None  # the sender of the message being carried out
        self._run_cost = 0.0
        self._run = services.tokens()  # names the run in per-run warnings
        self._stopping = False
        self._warned: set[str] = set()
        self._periods: dict[Kind, str] = {}  # of the latest decision
        self._standings: list[Standing] | None = None  # the spend as the last answer left it
        self.unsaved = UnsavedUsage(  # what the store could not take yet (a Redis restart)
            conversation.key,
            services.store.add_usage,
            lambda entry: _measure(services, entry),
            conversation.soon,
        )

    @property
    def chat(self) -> str:
        return chat_name(self._conversation.key, self._conversation.chat.chat_id)

    @property
    def person(self) -> str:
        """Whose budget the current run spends."""
        record = self._conversation.record
        return (record.run_by if record else None) or self._conversation.owner

    def heard(self, inbound: Inbound) -> None:
        """A message is being carried out: remember who sent it."""
        sender = inbound.sender
        self.asking = sender
        if sender.name:
            self._names[sender.id] = sender.name
        if inbound.message_id is not None:
            self._senders[inbound.message_id] = sender
            while len(self._senders) > SENDERS:
                self._senders.popitem(last=False)

    # --- a run's start ------------------------------------------------------------------

    async def refused(self, message_id: str | None) -> bool:
        """A message would start a run: refused (and told) if a limit is reached;
        otherwise its sender is the run's person."""
        sender = self._senders.get(message_id) if message_id is not None else self.asking
        person = sender.id if sender is not None else self._conversation.owner
        if self._budgets.enabled:
            decision = await self._decide("start", person)
            if decision.action == "refuse" and decision.reading is not None:
                self._refuse(decision.reading)
                return True
            await self._warn(decision)
        record = self._conversation.record
        if record is not None and record.run_by != person:
            await self._conversation.save(run_by=person)
        return False

    def _refuse(self, reading: Reading) -> None:
        conversation = self._conversation
        text = f"⛔ Not started: {self._limit_phrase(reading)} is used up: {self._spent(reading)}."
        approvers = self._services.options.approvers_of(conversation.key)
        base = self._base_limit(reading)
        if not approvers or reading.kind == "per_run" or base is None:
            conversation.notify(text + f" {self._resets(reading)}")
            return
        amount = raise_amount(base, self._budgets.raise_step)
        text += (
            f" An approver can raise today's limit by {self._budgets.raise_step * 100:.0f} %"
            f" ({money(amount)})."
        )
        value = f"{reading.scope}|{reading.name}|{amount}"
        option = PickerOption(f"💰 Raise today's limit (+{money(amount)})", value)
        conversation.submit(conversation.renderer.pick(RAISE, text, [option], 1))

    async def raise_pressed(self, press: Press, choice: PickerChoice, sender: Sender) -> None:
        """[Raise today's limit]: an approver adds to today's limit; anyone else is told no."""
        conversation = self._conversation
        if not sender.named_in(self._services.options.approvers_of(conversation.key)):
            conversation.submit([AnswerPress(press.press_id, "Only an approver can raise it.")])
            return
        scope, name, amount_text = choice.value.split("|")
        amount = float(amount_text)
        day = periods(self._services.wall(), self._budgets.zone).day_name
        await self._services.store.raise_limit(_raise_name(scope, name, day), amount)
        who = sender.name or sender.id
        conversation.submit([AnswerPress(press.press_id, f"Raised by {money(amount)}.")])
        outcome = f"💰 {who} raised today's limit by {money(amount)}; send the message again."
        conversation.submit(conversation.renderer.close_picker(choice.picker_id, outcome))

    # --- while it runs ------------------------------------------------------------------

    async def observe(self, event: AgentEvent) -> None:
        """An agent event: a run's start, an answer's usage, a tool's start. A failure
        here (the store unreachable) is logged and goes no further: the event's other
        meanings (agent_events.py) do not wait on the spend."""
        try:
            await self._observe(event)
        except Exception:
            log.exception("conversation %s: spend not recorded", self._conversation.key)

    async def _observe(self, event: AgentEvent) -> None:
        match event:
            case RunStarted():
                self._run_cost = 0.0
                self._standings = None
                self._run = self._services.tokens()
                self._stopping = False
            case MessageEnd(message=AssistantMessage() as message):
                await self._count(message)
            case ToolExecutionStart() if self._budgets.enabled and not self._stopping:
                await self._boundary()

    async def _count(self, message: AssistantMessage) -> None:
        entry = entry_of(
            message,
            key=self._conversation.key,
            person=self.person,
            chat=self.chat,
            # The bridge's clock, not the message's timestamp: what the agent writes
            # could date its spend into a period that no longer counts.
            at=self._services.wall(),
        )
        if entry is None:
            return
        # A replayed answer is counted in its run again (the run is replayed from its
        # start), but kept and measured once.
        self._run_cost += entry.cost
        await self.unsaved.add(entry)
        if self._budgets.enabled:
            await self._warn(await self._decide("usage", self.person))

    async def _boundary(self) -> None:
        decision = await self._decide("tool", self.person)
        if decision.action == "stop" and decision.reading is not None:
            self._stopping = True
            reading = decision.reading
            self._conversation.notify(
                f"⛔ Stopped: {self._limit_phrase(reading)} is used up: {self._spent(reading)}."
            )
            self._conversation.soon(self._conversation.intents.stop)
            return
        await self._warn(decision)

    # --- decisions ----------------------------------------------------------------------

    async def _decide(self, moment: Moment, person: str) -> Decision:
        """What the limits say; a tool's start reads the spend as the last answer left
        it (the answer that asked for the tool is in it), so a run of many tools reads
        the store once an answer, not once a tool."""
        now = periods(self._services.wall(), self._budgets.zone)
        standings = self._standings
        if moment != "tool" or standings is None:
            standings = self._standings = await self._standings_now(person, now)
        names: dict[Kind, str] = {
            "daily": now.day_name,
            "monthly": now.month_name,
            "per_run": self._run,
        }
        self._periods = names
        return decide(
            moment,
            standings,
            run_cost=self._run_cost,
            periods=names,
            warned=self._warned,
            warn_at=self._budgets.warn_at,
        )

    async def _standings_now(self, person: str, now: Periods) -> list[Standing]:
        store = self._services.store
        standings = []
        subjects: tuple[tuple[Scope, str, Limits], ...] = (
            ("person", person, self._budgets.of_person(person)),
            ("chat", self.chat, self._budgets.of_chat(self.chat)),
        )
        for scope, name, limits in subjects:
            if not limits.any:
                continue
            today = await store.usage_totals(scope, name, now.day)
            month = await store.usage_totals(scope, name, now.month)
            raised = await store.raised(_raise_name(scope, name, now.day_name))
            standings.append(Standing(scope, name, limits, today.cost, month.cost, raised))
        return standings

    async def _warn(self, decision: Decision) -> None:
        for reading in decision.warnings:
            key = reading.key(self._periods[reading.kind])
            self._warned.add(key)
            # Claimed in the store: once, whichever worker or restart sees it first.
            if await self._services.store.seen(f"budget-warned:{key}", WARNED_TTL):
                continue
            self._conversation.notify(
                f"⚠️ {_capital(self._limit_phrase(reading))} is {reading.share * 100:.0f} %"
                f" used: {self._spent(reading)}."
            )

    # --- words --------------------------------------------------------------------------

    def _limit_phrase(self, reading: Reading) -> str:
        kind = {"daily": "daily", "monthly": "monthly", "per_run": "per-run"}[reading.kind]
        if reading.kind == "per_run":
            return "this run's budget"
        if reading.scope == "chat":
            return f"this chat's {kind} budget"
        return f"{self._names.get(reading.name, reading.name)}'s {kind} budget"

    def _spent(self, reading: Reading) -> str:
        when = {"daily": " today", "monthly": " this month", "per_run": ""}[reading.kind]
        return f"{money(reading.spent)} of {money(reading.limit)}{when}"

    def _resets(self, reading: Reading) -> str:
        zone = self._budgets.zone_name
        if reading.kind == "daily":
            return f"It starts again at midnight ({zone})."
        return f"It starts again next month ({zone})."

    def _base_limit(self, reading: Reading) -> float | None:
        budgets = self._budgets
        if reading.scope == "person":
            limits = budgets.of_person(reading.name)
        else:
            limits = budgets.of_chat(reading.name)
        return limits.daily if reading.kind == "daily" else limits.monthly

    # --- /usage -------------------------------------------------------------------------

    async def report(self) -> str:
        """The /usage table: the person asking, this chat, this conversation."""
        budgets = self._budgets
        now = periods(self._services.wall(), budgets.zone)
        asking = self.asking
        person = asking.id if asking is not None else self._conversation.owner
        name = ((asking.name if asking is not None else "") or person)[:20]  # one line on a phone
        store = self._services.store
        rows = []
        subjects: tuple[tuple[str, UsageScope, str, Limits | None], ...] = (
            (f"you ({name})", "person", person, budgets.of_person(person)),
            ("this chat", "chat", self.chat, budgets.of_chat(self.chat)),
            ("this conversation", "conversation", self._conversation.key, None),
        )
        for title, scope, subject, limits in subjects:
            today, week, month = [
                await store.usage_totals(scope, subject, since)
                for since in (now.day, now.week, now.month)
            ]
            raised = 0.0
            if limits is not None and limits.any:
                raised = await store.raised(_raise_name(scope, subject, now.day_name))
            rows.append(Row(title, today, week, month, limits=limits, raised=raised))
        return usage_table(rows, budgets.zone_name)


def _raise_name(scope: str, name: str, day: str) -> str:
    return f"{scope}:{name}:{day}"


def _capital(text: str) -> str:
    """ "This chat's …" at a sentence's start; a person's name stays as written."""
    return "T" + text[1:] if text.startswith("this ") else text


def _measure(services: Services, entry: UsageEntry) -> None:
    stats = services.stats
    stats.spend_cost += entry.cost
    for kind in ("input", "output", "cache_read", "cache_write"):
        stats.spend_tokens[kind] += getattr(entry, kind)

"""The bridge as one service: admission, then conversations, then the outbox.

`Bridge` is the composition root an adapter drives: `async with Bridge(...) as
bridge:` starts the outbox and the supervisor in one task group; the adapter
calls `await bridge.handle(inbound)` for every platform update and returns at
once (docs/design.md, "Platform libraries": a waiting handler stalls button presses).
Leaving the block drains: runs may finish for `drain_timeout`, live messages
are marked interrupted, agents are stopped, queued chat output is flushed.

Admission happens here, before any agent work: the bot's own and other bots'
messages and edits are dropped, redeliveries are dropped by their delivery id
(remembered in the store, so also across a restart), and senders who are not
allowed get one polite refusal a day and nothing else.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol, Self

import anyio

from bridge.admission import ADMIT_TRIES, GIVEN_UP, AdmissionFailed, refusal, screen
from bridge.conversation.agent_slots import AgentSlots
from bridge.conversation.shared import Services
from bridge.conversation.supervisor import Supervisor
from bridge.model import AnswerPress, Send
from bridge.outbox import Outbox
from bridge.schedules.ticker import Ticker

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from anyio.abc import TaskGroup

    from bridge.model import Inbound
    from bridge.options import BridgeOptions
    from bridge.outbox.pacer import RateStore
    from bridge.platform import Adapter
    from bridge.store.base import Store

log = logging.getLogger(__name__)

FLUSH_ON_EXIT = 10.0  # last messages ("interrupted by restart") get this long to go out
FAILED_KEPT = 1000  # delivery ids with failed admissions remembered (their try count)
REFUSAL_TTL = 24 * 60 * 60


class _StoreDown(Exception):
    """The store failed while an inbound was being admitted: checking its delivery id,
    or opening the conversation it goes to (whose record is read from the store)."""


def new_token() -> str:
    """An opaque button token: 96 random bits, 16 URL-safe characters (≤ 64 bytes)."""
    return secrets.token_urlsafe(12)


class Forward(Protocol):
    """Where admitted inbounds go instead of this process's conversations (a
    frontend's: to their owning workers, bridge/scale/). Raises when it could not
    take one in (then the platform delivers it again)."""

    async def deliver(self, inbound: Inbound, arrived: float) -> bool: ...


class Bridge:
    def __init__(
        self,
        adapter: Adapter,
        store: Store,
        options: BridgeOptions,
        *,
        bot_name: str = "",
        prefixes: tuple[str, ...] = ("/",),
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        tokens: Callable[[], str] = new_token,
        forward: Forward | None = None,
        shared: bool = False,
        taken: Callable[[Inbound], None] | None = None,
        scheduled_to: Forward | None = None,
        rates: RateStore | None = None,
    ) -> None:
        """`forward`: admit here, carry out elsewhere (no conversations, no agents).
        `shared`: conversations are leased among workers (`Supervisor.take_over`);
        `taken` hears of each inbound carried out. `scheduled_to`: where scheduled
        runs go (a worker's: onto their conversation's stream; None: admitted here).
        `rates`: where the platform's per-method budgets are kept (None: in this
        process; a scale-out's processes share them in Redis)."""
        self.adapter = adapter
        self.store = store
        self.options = options
        self.outbox = Outbox(adapter, clock=clock, rates=rates)
        self.services = Services(
            adapter=adapter,
            outbox=self.outbox,
            store=store,
            options=options,
            gate=AgentSlots(options.max_agents),
            tokens=tokens,
            clock=clock,
            wall=wall,
            bot_name=bot_name,
            prefixes=prefixes,
        )
        if taken is not None:
            self.services.taken = taken
        self.supervisor = Supervisor(self.services, shared=shared)
        self.forward = forward
        self._scheduled_to = scheduled_to
        # Schedules fire where conversations are owned (bridge/schedules/ticker.py).
        self.ticker = None if forward is not None else Ticker(store, options, wall, self._scheduled)
        self._failed: OrderedDict[str, int] = OrderedDict()  # delivery id → failed tries
        self._tg: TaskGroup | None = None  # the services' tasks
        self._stack: contextlib.AsyncExitStack | None = None  # the task group, once started

    async def __aenter__(self) -> Self:
        async with contextlib.AsyncExitStack() as stack:
            tg = self._tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)  # leaving ends the services, not waits
            await tg.start(self.outbox.run)
            if self.forward is None:
                await tg.start(self.supervisor.run)
            if self.ticker is not None:
                await tg.start(self.ticker.run)
            self._stack = stack.pop_all()  # started: kept open until __aexit__
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._stack is not None
        if self.ticker is not None:
            self.ticker.stop()
        with anyio.CancelScope(shield=True):
            if self.forward is None:
                await self.supervisor.drain()
            self.supervisor.accepting = False
            with anyio.move_on_after(FLUSH_ON_EXIT):
                await self.outbox.flush()
        stack, self._stack = self._stack, None
        return await stack.__aexit__(exc_type, exc, tb)

    async def handle(self, inbound: Inbound) -> None:
        """Admit one platform update and hand it on; never raises for its content.

        Raises `AdmissionFailed` when the store failed before the update was taken in:
        the adapter must not confirm it (bridge/admission.py). After `ADMIT_TRIES`
        attempts of one delivery the person is told instead, and this returns.
        """
        log.debug("inbound %s for %s", inbound.event_id, inbound.key)
        try:
            await self._admit(inbound, self.services.clock())
        except _StoreDown as down:
            tries = self._failed.pop(inbound.event_id, 0) + 1
            log.warning("store failed admitting %s (try %d): %s", inbound.key, tries, down)
            if tries < ADMIT_TRIES and inbound.event_id:
                self._failed[inbound.event_id] = tries
                while len(self._failed) > FAILED_KEPT:
                    self._failed.popitem(last=False)
                raise AdmissionFailed(str(down)) from down
            self._tell_failed(inbound)
        except Exception:
            log.exception("inbound for %s failed", inbound.key)
        else:
            self._failed.pop(inbound.event_id, None)

    async def _scheduled(self, inbound: Inbound) -> None:
        """A scheduled run (or its missed report), from the ticker: raises when it
        could not be handed in."""
        if self._scheduled_to is not None:
            await self._scheduled_to.deliver(inbound, self.services.wall())
        elif self.supervisor.accepting:
            await self._admit(inbound, self.services.clock())
        else:
            raise RuntimeError("the bridge is draining")

    def undecodable(self) -> None:
        """The runner skipped an update it could not read (counted for the metrics)."""
        self.services.stats.undecodable += 1

    def _tell_failed(self, inbound: Inbound) -> None:
        if inbound.press is not None:
            press = AnswerPress(inbound.press.press_id, GIVEN_UP, alert=True)
            self.outbox.submit(inbound.key, inbound.chat, [press])
        else:
            self._say(inbound, GIVEN_UP)

    async def _admit(self, inbound: Inbound, arrived: float) -> None:
        allowed = self.options.allowed_users
        if allowed is not None and inbound.press is not None:
            # Approvers answer questions wherever they see them (a copy in their direct
            # messages, approving.py) even when they may not talk to an agent themselves.
            allowed = allowed | self.options.all_approvers()
        gate = screen(inbound, allowed)
        if gate is not None and gate.action == "drop":
            return
        # A frontend's forward marks the delivery id seen as it queues the inbound, in
        # one step: one taken in twice, or marked and never queued, cannot happen.
        if self.forward is None and await self._duplicate(inbound):
            return
        if gate is not None:
            await self._refuse(inbound)
            return
        try:
            if self.forward is not None:
                delivered = self.supervisor.accepting and await self.forward.deliver(
                    inbound, self.services.wall()
                )
            else:
                delivered = await self.supervisor.deliver(inbound, arrived)
        except Exception as exc:  # a new conversation could not be opened: not taken in
            raise _StoreDown(f"{type(exc).__name__}: {exc}") from exc
        if not delivered:
            self._say(inbound, "⏳ The bridge is restarting; please send that again in a minute.")

    async def _duplicate(self, inbound: Inbound) -> bool:
        """Whether the store has seen this delivery id. One whose admission failed here
        after the id was recorded is this process's own retry, not a redelivery."""
        try:
            seen = bool(inbound.event_id) and await self.store.seen(
                f"in:{inbound.event_id}", self.options.dedupe_ttl
            )
        except Exception as exc:  # any backend's failure: nothing was taken in yet
            raise _StoreDown(f"{type(exc).__name__}: {exc}") from exc
        return seen and inbound.event_id not in self._failed

    async def _refuse(self, inbound: Inbound) -> None:
        if inbound.press is not None:
            self.outbox.submit(
                inbound.key,
                inbound.chat,
                [
                    AnswerPress(
                        inbound.press.press_id, "You are not allowed to use this bot.", alert=True
                    )
                ],
            )
            return
        if await self.store.seen(f"refused:{inbound.key}:{inbound.sender.id}", REFUSAL_TTL):
            return
        text = refusal(inbound.sender.id)
        if inbound.private_reply:  # only the sender sees it (e.g. Slack's ephemeral)
            self.outbox.submit(
                inbound.key, inbound.chat, [AnswerPress(inbound.private_reply, text)]
            )
        else:
            self._say(inbound, text)

    def _say(self, inbound: Inbound, text: str) -> None:
        self.outbox.submit(
            inbound.key, inbound.chat, [Send(slot=f"bridge:{new_token()}", text=text)]
        )

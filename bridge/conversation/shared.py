"""What every conversation shares (`Services`), and the live-agent cap as a
conversation sees it (`SlotGate`): kept apart from `Conversation`, so that its
parts (dialogs, lifetime) and the supervisor depend on this, not on each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from bridge.stats import Stats

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Inbound
    from bridge.options import BridgeOptions
    from bridge.outbox import Outbox
    from bridge.platform import Adapter
    from bridge.store.base import Store


class Holder(Protocol):
    """A conversation holding, or waiting for, a live agent's slot."""

    @property
    def key(self) -> str: ...

    @property
    def owner(self) -> str: ...

    @property
    def idle(self) -> bool:
        """Live, not spawning and not running: its agent may be evicted."""

    @property
    def last_active(self) -> float: ...

    @property
    def max_per_user(self) -> int: ...

    async def reap(self) -> None: ...

    def notify(self, text: str) -> None: ...


class SlotGate(Protocol):
    """What a conversation needs from the supervisor's live-agent cap."""

    async def acquire(self, holder: Holder) -> None: ...

    def admit(self, holder: Holder) -> None:
        """Count `holder`'s agent at once, over the caps if need be: it is running
        already (taken back after a restart) and cannot wait."""

    def release(self, holder: Holder) -> None: ...

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
    # Told when an inbound is carried out (given to the agent, answered, refused as
    # too many): a worker acknowledges it on its stream then (bridge/scale/).
    taken: Callable[[Inbound], None] = lambda inbound: None

"""One configured platform served: its options narrowed to it, its bridge made, its
runner run (`bridge.app.platforms` says how, per platform).

`make(platform, adapter, options, bot_name)` makes the bridge and yields its counted
handler: `--role all` makes a plain `Bridge` (bridge/app/run.py), a frontend one
that forwards what it admits (bridge/app/roles.py), which also gates a long poll
by its lease (`poll_gate`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from bridge.app.platforms import Serving

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import anyio

    from bridge.app.metrics import Counted
    from bridge.app.platforms import Configured, PollGate
    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from bridge.store.base import Store


class MakeBridge(Protocol):
    """Makes `platform`'s bridge on `adapter` and yields its counted handler;
    `bot_name`: the bot's, where the platform's runner learns it ("" otherwise)."""

    def __call__(
        self, platform: Configured, adapter: Adapter, options: BridgeOptions, bot_name: str
    ) -> AbstractAsyncContextManager[Counted]: ...


async def serve(
    platform: Configured,
    options: BridgeOptions,
    store: Store,
    stopping: anyio.Event,
    make: MakeBridge,
    poll_gate: PollGate | None = None,
) -> None:
    """Serve `platform` until `stopping` is set (and its bridge drained)."""
    narrowed = platform.options(options)

    def bridge_for(adapter: Adapter, bot_name: str) -> AbstractAsyncContextManager[Counted]:
        return make(platform, adapter, narrowed, bot_name)

    await platform.serve(Serving(narrowed, store, stopping, bridge_for, poll_gate))

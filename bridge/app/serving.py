"""Each platform served: its options narrowed to it, its bridge made, its runner run.

`make(platform, adapter, options, **bridge keywords)` makes the bridge and yields its
counted handler: `--role all` makes a plain `Bridge` (bridge/app/run.py), a frontend
one that forwards what it admits (bridge/app/roles.py), which also gates Telegram's
long poll by its lease (`poll_gate`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.app.platforms import for_platform

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    import anyio

    from bridge.app.config import Loaded
    from bridge.app.metrics import Counted
    from bridge.model import Adapter
    from bridge.store.base import Store

    MakeBridge = Callable[..., AbstractAsyncContextManager[Counted]]
    PollGate = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]


async def telegram(
    loaded: Loaded, stopping: anyio.Event, make: MakeBridge, poll_gate: PollGate | None = None
) -> None:
    from adapters.telegram.runner import serve as serve_telegram

    settings = loaded.telegram
    assert settings is not None
    options = for_platform(loaded.options, "tg:", settings.allowed_users, settings.approvers)

    def bridge_for(adapter: Adapter, bot_name: str) -> AbstractAsyncContextManager[Counted]:
        return make("telegram", adapter, options, bot_name=bot_name)

    # `stop` rather than cancellation: the runner then confirms the handled updates.
    await serve_telegram(settings, bridge_for, stop=stopping, poll_gate=poll_gate)


async def slack(loaded: Loaded, store: Store, stopping: anyio.Event, make: MakeBridge) -> None:
    from adapters.slack.groups import user_groups_in
    from adapters.slack.runner import PREFIXES, run_slack

    settings = loaded.slack
    assert settings is not None
    options = for_platform(loaded.options, "slack:", settings.allowed_users, settings.approvers)

    def bridge_for(adapter: Adapter) -> AbstractAsyncContextManager[Counted]:
        return make("slack", adapter, options, prefixes=PREFIXES)

    # Per-chat approvers may name user groups too; the intake resolves their members.
    groups = user_groups_in(*(chat.approvers for chat in options.chats.values()))
    await run_slack(settings, bridge_for, store, stop=stopping, user_groups=groups)

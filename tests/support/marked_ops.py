"""A real `Outbox` on fake time, fed the renderer's marked ops one at a time.

Shared by the outbox's draft and stream tests: `growing` makes the ops the renderer
emits for a streamed text (a draft Send, draft Edits, a seal), `serving` runs an
outbox over an in-memory platform, `deliver` submits ops one by one as the renderer
does while text streams, waiting for each.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from bridge.model import Edit, Send
from bridge.outbox import Outbox

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.model import ChatRef, Op
    from tests.support.recording_adapter import FakeClock, RecordingAdapter

REAL_SECONDS = 10  # a test that takes longer than this is stuck, not slow


def growing(slot: str, *texts: str) -> list[Op]:
    """The renderer's ops for a streamed text: a draft Send, draft Edits, a seal."""
    first, *rest = texts
    ops: list[Op] = [Send(slot, first, draft=True)]
    ops += [Edit(slot, text, draft=True) for text in rest]
    return [*ops, Edit(slot, texts[-1], seal=True)]


@asynccontextmanager
async def serving(platform: RecordingAdapter, clock: FakeClock) -> AsyncIterator[Outbox]:
    outbox = Outbox(platform, clock=clock, sleep=clock.sleep)
    with anyio.fail_after(REAL_SECONDS):
        async with anyio.create_task_group() as tg:
            await tg.start(clock.autojump)
            await tg.start(outbox.run)
            yield outbox
            tg.cancel_scope.cancel()


async def deliver(outbox: Outbox, key: str, chat: ChatRef, ops: list[Op]) -> None:
    """Each op on its own, as the renderer submits them while text streams."""
    for op in ops:
        outbox.submit(key, chat, [op])
        await outbox.flush()

"""Status messages that show how their run ended, as the frontends made them.

A worker's outbox names each call that shows a run's status live ("⏳ working…" with
[⏹ Stop]) or over ("✅ done") (`Call.status`). The frontend that makes an "over" call
marks its message here, for a day, and refuses (as `NotModified`: nothing to change)
a "live" edit of a marked message, whichever worker sends it: a run's end is final.

Why here, too, and not only in the worker's record (`HostRecord.ended`): a worker
killed while its last call, a run's end, waits at a frontend never learns it was
made; that call is made all the same (its fencing token is current until another
worker claims the conversation), and the next owner, replaying the run, would edit
the message back to working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from bridge.model import MessageRef

ENDED_TTL = 24 * 60 * 60  # s: a replay comes within `detach_timeout` (10 minutes)


class EndedStatuses:
    def __init__(self, client: aioredis.Redis, prefix: str, platform: str) -> None:
        self._redis = client
        self._prefix = f"{prefix}ended:{platform}:"

    def _key(self, ref: MessageRef) -> str:
        return f"{self._prefix}{ref.chat.chat_id}:{ref.message_id}"

    async def mark(self, ref: MessageRef) -> None:
        await self._redis.set(self._key(ref), "1", ex=ENDED_TTL)

    async def ended(self, ref: MessageRef) -> bool:
        return bool(await self._redis.exists(self._key(ref)))

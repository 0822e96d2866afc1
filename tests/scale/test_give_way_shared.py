"""A run's status gives way to answers over a whole scale-out: two workers' outboxes
share one Slack channel's posts through Redis (`SharedRates`, a real redis-server).

One worker holds runs whose statuses are still to be posted, the other the answers
of other threads of the same channel. The channel's posts are one budget for both;
the statuses go after the answers waiting for it, as they do within one process
(tests/outbox/test_give_way.py), and each status is posted once. (That a spare call
finds nothing while a taker of another process waits is tests/scale/test_budget.py's.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.model import Button, ChatRef, PlatformLimits, Send
from bridge.outbox import Outbox
from bridge.scale.budget import SharedRates
from tests.support.recording_adapter import RecordingAdapter
from tests.support.redis_server import redis_client

if TYPE_CHECKING:
    from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio

# Four posts a second per channel after a burst of one: quick, yet scarce.
SCARCE = PlatformLimits(
    chat_rate=4.0, chat_burst=1, chat_methods=frozenset({"send", "upload"}), thread_lanes=True
)
STOP = ((Button("⏹ Stop", "t"),),)
STATUSES, ANSWERS = 3, 6


def thread(n: int) -> tuple[str, ChatRef]:
    return f"slack:T1:C1:{n}.0", ChatRef("C1", thread_id=f"{n}.0")


async def test_statuses_of_one_worker_give_way_to_answers_of_another(
    redis_server: RedisServer, prefix: str
) -> None:
    platform = RecordingAdapter(SCARCE)  # one Slack, seen by both workers
    async with redis_client(redis_server.url) as one, redis_client(redis_server.url) as other:
        outboxes = [Outbox(platform, rates=SharedRates(c, prefix, "slack")) for c in (one, other)]
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for outbox in outboxes:
                    await tg.start(outbox.run)
                statuses, answers = outboxes
                # The channel's one post goes now; everything after waits for the rate.
                statuses.submit(*thread(0), [Send("notice:0", "first")])
                await statuses.flush()
                for n in range(1, ANSWERS + 1):
                    answers.submit(*thread(n), [Send(f"text:{n}:1:0", f"answer {n}")])
                await anyio.sleep(0.05)  # the answers wait for the channel's posts
                for n in range(ANSWERS + 1, ANSWERS + 1 + STATUSES):
                    key, chat = thread(n)
                    status = Send(f"status:{n}", "⏳ working…", buttons=STOP, gives_way=True)
                    statuses.submit(key, chat, [status])
                for outbox in outboxes:
                    await outbox.flush()
                tg.cancel_scope.cancel()
    made = [c.text for c in platform.calls_of("send", ok=True)]
    assert made[0] == "first"
    assert sorted(made[1 : ANSWERS + 1]) == sorted(f"answer {n}" for n in range(1, ANSWERS + 1))
    assert made[ANSWERS + 1 :] == ["⏳ working…"] * STATUSES

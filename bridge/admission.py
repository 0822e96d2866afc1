"""When the bridge cannot take a message in: tell the platform to deliver it again.

Admission needs the store (a delivery id is remembered there before anything runs,
so that a redelivery never starts a second run). If the store fails at that moment
the message must not be lost: `Bridge.handle` raises `AdmissionFailed`, and the
adapter leaves the update unconfirmed so that it comes again (Telegram's polling
offset does not move past it), or, where the platform was already answered (a
webhook, Slack's ack), hands it in again itself with `until_taken`. The bridge
counts the attempts per delivery id; after `ADMIT_TRIES` it tells the person, and
the update is let go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import anyio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

# A store hiccup (a Redis failover, a locked sqlite file) lasts seconds: five tries
# over about eight seconds, then the person is asked to send it again.
ADMIT_TRIES = 5
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
GIVEN_UP = (
    "⚠️ The bridge could not take your message in (its storage is failing), so it "
    "did not reach the agent. Please send it again in a minute."
)


T = TypeVar("T")


class AdmissionFailed(Exception):
    """The bridge could not take this inbound in; deliver it again later."""


def retry_delay(attempt: int) -> float:
    """Seconds before attempt `attempt` + 1 (attempts count from 1)."""
    return RETRY_DELAYS[min(attempt, len(RETRY_DELAYS)) - 1]


async def until_taken(handle: Callable[[T], Awaitable[None]], item: T) -> None:
    """`handle(item)` (an inbound, or a platform update that becomes one), again after
    each `AdmissionFailed`, until the bridge takes it or gives up on it (it then tells
    the person and returns normally)."""
    attempt = 0
    while True:
        try:
            await handle(item)
            return
        except AdmissionFailed:
            attempt += 1
            await anyio.sleep(retry_delay(attempt))

"""When the bridge cannot take a message in: tell the platform to deliver it again.

Admission needs the store (a delivery id is remembered there before anything runs,
so that a redelivery never starts a second run). If the store fails at that moment
the message must not be lost: `Bridge.handle` raises `AdmissionFailed`, and the
adapter leaves the update unconfirmed so that it comes again (Telegram's polling
offset does not move past it), or, where the platform was already answered (a
webhook, Slack's ack), hands it in again itself with `until_taken`. The bridge
counts the attempts per delivery id; after `ADMIT_TRIES` it tells the person, and
the update is let go.

Before that, `screen` is the pure part of admission: the bridge's own and other
bots' messages and edits are dropped, senders not allowed are refused (`refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio

from bridge.backoff import Backoff

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from bridge.model import Inbound

# A store hiccup (a Redis failover or restart, a locked sqlite file) lasts seconds: six
# tries over about eight seconds, then the person is asked to send it again. At most
# 2 s apart: a Telegram poller waits so before it polls again, holding every chat's
# updates, so a store back is found within 2 s (it was 8 s: up to 4 s after a 3 s
# Redis restart, issue 34).
ADMIT_TRIES = 6
RETRY_BACKOFF = Backoff(first=0.5, cap=2.0)
GIVEN_UP = (
    "⚠️ The bridge could not take your message in (its storage is failing), so it "
    "did not reach the agent. Please send it again in a minute."
)


T = TypeVar("T")


class AdmissionFailed(Exception):
    """The bridge could not take this inbound in; deliver it again later."""


def retry_delay(attempt: int) -> float:
    """Seconds before attempt `attempt` + 1 (attempts count from 1): 0.5 s doubling,
    at most 2 s."""
    return RETRY_BACKOFF.delay(attempt)


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


@dataclass(frozen=True, slots=True)
class Gate:
    """Why an inbound is not routed, or None to route it."""

    action: Literal["drop", "refuse"]
    reason: str


def refusal(user_id: str) -> str:
    """What a sender `screen` refuses is told (once), with the id an admin would add."""
    return (
        "Sorry, you are not allowed to use this bot. "
        f"(Your user id is {user_id}; an admin can add it.)"
    )


def screen(inbound: Inbound, allowed: Collection[str] | None) -> Gate | None:
    """The pure part of admission: own messages and edits are dropped, senders not
    in `allowed` (None: everyone) are refused. Duplicates are checked by the
    caller against the store, which remembers delivery ids across restarts."""
    if inbound.from_self or inbound.sender.is_bot:
        return Gate("drop", "own or bot message")
    if inbound.is_edit:
        return Gate("drop", "edit of an earlier message")
    if allowed is not None and not inbound.sender.named_in(allowed):
        return Gate("refuse", "sender not allowed")
    return None

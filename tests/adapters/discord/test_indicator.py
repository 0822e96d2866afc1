"""The typing indicator's rules, on a clock the test moves: on from a chat's first
"working" mark to its last "done", again right after each new message, let go when
nothing happens for a while; a failed trigger changes nothing."""

from __future__ import annotations

import pytest

from adapters.discord.indicator import EVERY, IDLE, TypingIndicator
from bridge.model import ChatRef
from bridge.platform import PlatformError

pytestmark = pytest.mark.anyio

CHAT = ChatRef("10", "20")
OTHER = ChatRef("30")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def triggered(indicator: TypingIndicator, fired: list[ChatRef]) -> list[ChatRef]:
    fired.clear()
    await indicator.due()
    return list(fired)


async def test_a_working_chat_types_every_few_seconds_until_its_runs_end() -> None:
    clock, fired = Clock(), list[ChatRef]()

    async def trigger(chat: ChatRef) -> None:
        fired.append(chat)

    indicator = TypingIndicator(trigger, clock=clock)
    indicator.started(CHAT, "m1")
    indicator.started(CHAT, "m2")  # a steer joined the run
    assert await triggered(indicator, fired) == [CHAT]
    clock.now += 1
    assert await triggered(indicator, fired) == []
    indicator.posted(CHAT, new=True)  # the bot's message ended the indicator: again now
    assert await triggered(indicator, fired) == [CHAT]
    indicator.posted(CHAT, new=False)  # an edit does not end it
    assert await triggered(indicator, fired) == []
    clock.now += EVERY
    assert await triggered(indicator, fired) == [CHAT]
    indicator.ended(CHAT, "m1")
    assert indicator.working == {CHAT}
    indicator.ended(CHAT, "m2")
    assert indicator.working == frozenset()
    clock.now += EVERY
    assert await triggered(indicator, fired) == []


async def test_a_run_nobody_ends_is_let_go_after_a_quiet_while() -> None:
    clock, fired = Clock(), list[ChatRef]()

    async def trigger(chat: ChatRef) -> None:
        fired.append(chat)

    indicator = TypingIndicator(trigger, clock=clock)
    indicator.started(CHAT, "m1")
    indicator.started(OTHER, "m9")
    clock.now += IDLE - 1
    indicator.posted(OTHER, new=False)  # still at work there
    clock.now += 2
    assert await triggered(indicator, fired) == [OTHER]
    assert indicator.working == {OTHER}
    indicator.ended(CHAT, "m1")  # an end for a chat let go of is harmless
    indicator.posted(CHAT, new=True)


async def test_a_failed_trigger_is_only_logged() -> None:
    clock = Clock()

    async def refused(chat: ChatRef) -> None:
        raise PlatformError("50013 Missing Permissions")

    indicator = TypingIndicator(refused, clock=clock)
    indicator.started(CHAT, "m1")
    await indicator.due()
    assert indicator.working == {CHAT}

"""A platform's redelivery of an event the bridge already handled starts nothing.

Platforms deliver some events twice: Slack retries an event it thinks was missed,
Telegram hands out again every update past the last confirmed offset after a
crash. The bridge itself (not only the adapters) must drop the second copy, by
its delivery id, in the same process and after a restart on the same store.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from adapters.telegram.convert import Me, convert
from bridge.model import Inbound
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import CHAT, KEY, OWNER, options, running_bridge
from tests.support.fake_llm import Reply
from tests.support.journeys import requests_with

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

ONCE = Inbound(KEY, CHAT, OWNER, "delivery-1", text="count PEAR once", message_id="u1")


async def then_answered(chat: BridgeHarness, text: str, answer: str) -> None:
    """A fresh message after the redelivery, answered: whatever the redelivery would
    have started has had its chance (messages of one conversation go in order)."""
    await chat.say(text)
    await chat.shown(answer)
    await chat.idle()


async def test_a_redelivered_message_starts_no_second_run_even_after_a_restart(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("PEAR", Reply(text="Pears counted."))
    fake_llm.add("QUINCE", Reply(text="Quinces noted."))
    fake_llm.add("RAISIN", Reply(text="Raisins noted."))
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())

    async with running_bridge(opts) as chat:
        await chat.bridge.handle(ONCE)
        await chat.shown("Pears counted.")
        await chat.idle()
        await chat.bridge.handle(ONCE)  # Slack's retry, in the same process
        await then_answered(chat, "and QUINCE", "Quinces noted.")

    async with running_bridge(opts) as chat:  # a restart on the same store
        await chat.bridge.handle(ONCE)  # Telegram's redelivery after a crash
        await then_answered(chat, "and RAISIN", "Raisins noted.")

    assert requests_with(fake_llm, "count PEAR once") == 1


async def test_two_bots_sharing_one_store_each_take_their_own_update_one(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    # Telegram numbers updates per bot: both bots' first update is update 1.
    fake_llm.add("PLUM", Reply(text="Plums noted."))
    update = {
        "update_id": 1,
        "message": {
            "message_id": 5,
            "date": 0,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "is_bot": False, "first_name": "Alice"},
            "text": "PLUM from the other bot",
        },
    }
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())
    for bot_id in (111, 222):
        incoming = convert(update, Me(bot_id, f"bot{bot_id}"))
        assert incoming is not None
        inbound = dataclasses.replace(incoming.inbound, key=KEY, chat=CHAT)
        async with running_bridge(opts) as chat:  # the same data dir: the same store
            await chat.bridge.handle(inbound)
            await chat.shown("Plums noted.")
            await chat.idle()
    assert requests_with(fake_llm, "PLUM from the other bot") == 2

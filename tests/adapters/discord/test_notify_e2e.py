"""Notifications end to end on Discord (fake Discord → discord.py → Bridge → real pi
agent): every message the bridge posts carries SUPPRESS_NOTIFICATIONS and mentions
nobody, but for the two pings, which mention the person who started the run and let
that one mention through (`allowed_mentions`), as the fake records (`Message.pinged`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from bridge.model import NotifySettings
from bridge.options import ApprovalOptions
from tests.adapters.discord.harness import button, discord_bridge, shown, thread_of
from tests.support.fake_discord import ALICE, BOB, GENERAL, ROLE_PI_USERS
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from bridge.options import BridgeOptions
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


async def test_only_the_question_and_the_end_ping_their_person(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build; echo gone <@999>"})]),
        Reply(text="Finished cleaning, <@999> and @everyone."),
    )
    gate = dataclasses.replace(
        opts, approvals=ApprovalOptions(mode="dangerous"), notify=NotifySettings(quiet_under=0)
    )
    users, roles = frozenset({str(BOB.id)}), frozenset({str(ROLE_PI_USERS)})
    async with discord_bridge(gate, allowed_users=users, allowed_roles=roles) as fake:
        mention = await fake.user_says(GENERAL, "clean the build", mentions_bot=True)
        thread = await thread_of(fake, mention)
        question = await shown(fake, "Approve this", thread.id)
        assert question.pinged == [ALICE.id]
        await fake.press(question, button(question, "Allow once"), user=ALICE)
        ping = await shown(fake, ": Finished cleaning", thread.id)
        assert ping.pinged == [ALICE.id]
        assert not ping.silent
        posted = [m for m in fake.messages(thread.id) if m.from_bot and m.interaction_id is None]
        assert [m.id for m in posted if m.pinged] == [question.id, ping.id]
        assert all(m.silent for m in posted if m.id not in (question.id, ping.id))

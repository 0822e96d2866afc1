"""Who and where, end to end on Discord: without the message-content intent the bot
still takes mentions, DMs and slash commands; channels outside `allowed_channels` are
not seen; a forum post that mentions the bot is its conversation; an approver answers
the gate's question from a direct message."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from bridge.options import ApprovalOptions
from tests.adapters.discord.harness import WAIT, button, discord_bridge, shown, thread_of
from tests.support.fake_discord import ALICE, BOB, FORUM, GENERAL, RANDOM
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from bridge.options import BridgeOptions
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


async def test_without_the_content_intent_mentions_and_slash_commands_still_work(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("first", Reply(text="First answered."))
    fake_llm.add("third", Reply(text="Third answered."))
    async with discord_bridge(opts, message_content=False) as fake:
        mention = await fake.user_says(GENERAL, "the first one", mentions_bot=True)
        thread = await thread_of(fake, mention)
        await shown(fake, "First answered.", thread.id)
        await shown(fake, "done", thread.id)
        await fake.user_says(thread.id, "the second one, unseen")  # its text is withheld
        await fake.user_says(thread.id, "the third one", mentions_bot=True)
        await shown(fake, "Third answered.", thread.id)
        used = await fake.slash(thread.id, "status")
        await fake.wait_for(lambda: used.answered)
    assert not fake.identified[0]["intents"] & (1 << 15)
    asked = [r.last_user_text for r in fake_llm.requests]
    assert asked == ["the first one", "the third one"]
    assert not used.failed


async def test_a_channel_outside_the_allowed_ones_is_not_seen(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("here", Reply(text="Answered here."))
    async with discord_bridge(opts, allowed_channels=frozenset({str(GENERAL)})) as fake:
        await fake.user_says(RANDOM, "over there", mentions_bot=True)
        elsewhere = await fake.slash(RANDOM, "pi", {"text": "over there too"})
        await fake.wait_for(lambda: elsewhere.answered)
        mention = await fake.user_says(GENERAL, "right here", mentions_bot=True)
        await shown(fake, "Answered here.", (await thread_of(fake, mention)).id)
    assert elsewhere.response is not None
    assert "not enabled in this channel" in elsewhere.response["data"]["content"]
    assert [t.parent_id for t in fake.threads] == [GENERAL]
    assert [r.last_user_text for r in fake_llm.requests] == ["right here"]


async def test_a_forum_post_that_mentions_the_bot_is_its_conversation(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("the forum", Reply(text="Answered in the post."))
    fake_llm.add("and more", Reply(text="More, in the post."))
    async with discord_bridge(opts) as fake:
        post = await fake.user_creates_thread(FORUM, "help", "anyone around?")
        await fake.user_says(post.id, "a question for the forum", mentions_bot=True)
        await shown(fake, "Answered in the post.", post.id)
        await fake.user_says(post.id, "and more please")
        await shown(fake, "More, in the post.", post.id)
    assert len(fake.threads) == 1  # no thread of its own: the post is the conversation


async def test_an_approver_allows_from_a_direct_message_and_the_thread_shows_who(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add(
        "force push",
        Reply(tool_calls=[ToolCall("bash", {"command": "git push -f origin main || echo no"})]),
        Reply(text="Pushed it."),
    )
    gate = ApprovalOptions(mode="dangerous", notify_approvers="dm")
    approving = dataclasses.replace(opts, approvals=gate)
    async with discord_bridge(approving, approvers=frozenset({str(BOB.id)})) as fake:
        mention = await fake.user_says(GENERAL, "force push please", mentions_bot=True)
        thread = await thread_of(fake, mention)
        here = await shown(fake, "Approve this", thread.id)
        dm = fake.dm_channel(BOB)
        there = await shown(fake, "Approve this", dm)
        pressed = await fake.press(there, button(there, "Allow once"), user=BOB)
        await shown(fake, "Pushed it.", thread.id)
        await fake.wait_for(lambda: "Allow once" in fake.message(here.id).content, WAIT)
        await fake.wait_for(lambda: "Allow once" in fake.message(there.id).content, WAIT)
    assert not fake.message(here.id).buttons, "buttons left behind"
    assert not fake.message(there.id).buttons, "buttons left in the DM"
    assert not pressed.failed
    assert fake.dms.get(ALICE.id) is None  # only the approver was written to

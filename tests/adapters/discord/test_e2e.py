"""Discord end to end: fake Discord (REST API v10 and the gateway) → real discord.py →
`serve` → real `Bridge` → real pi agent (against the scripted fake LLM) →
`DiscordAdapter` → fake Discord.

The fake enforces Discord's rate limits (per-route buckets, with the headers discord.py
paces by), so these journeys also show the bridge stays within them. Assertions are on
what the channel and its thread show, as a person would see them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from bridge.options import ApprovalOptions
from tests.adapters.discord.harness import WAIT, button, discord_bridge, shown, thread_of
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options
from tests.support.fake_discord import ALICE, BOB, GENERAL, ROLE_PI_USERS, FakeDiscord
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import (
    ASK_ANSWER,
    NOT_REACHED,
    STEERED,
    UNSTEERED,
    agent_got,
    requests_with,
    script_dialog,
    script_long_run,
    script_steerable_run,
    tool_results,
)

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

ASKED = "Approve this"


async def test_a_mention_opens_a_thread_and_the_answer_streams_into_it_by_edits(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    answer = "The answer is forty two, and here is why it matters so much today."
    fake_llm.add("a question", Reply(text=answer, delay=0.25))
    async with discord_bridge(opts) as fake:
        mention = await fake.user_says(GENERAL, "a question for you", mentions_bot=True)
        thread = await thread_of(fake, mention)
        reply = await shown(fake, "matters so much today.", thread.id)
        await shown(fake, "done", thread.id)
        await fake.wait_for(lambda: fake.reactions.get(mention.id) == ["✅"], WAIT)
    assert reply.content.strip() == answer
    assert reply.edited_at, "the answer was not streamed by edits"
    assert thread.name == "a question for you"
    assert [m.id for m in fake.messages(GENERAL)] == [mention.id]  # all else in the thread
    assert fake.limited == []
    assert [r.last_user_text for r in fake_llm.requests] == ["a question for you"]


async def test_a_message_in_the_thread_while_the_agent_works_steers_it_and_is_marked(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    script_steerable_run(fake_llm)
    async with discord_bridge(opts) as fake:
        mention = await fake.user_says(GENERAL, "do it slowly", mentions_bot=True)
        thread = await thread_of(fake, mention)
        await shown(fake, "bash", thread.id)
        steer = await fake.user_says(thread.id, "STEER-PURPLE instead")
        await shown(fake, STEERED, thread.id)
        # Each shows how the run it reached ended.
        await fake.wait_for(lambda: fake.reactions.get(mention.id) == ["✅"], WAIT)
        await fake.wait_for(lambda: fake.reactions.get(steer.id) == ["✅"], WAIT)
    assert fake.find(UNSTEERED, thread.id) is None
    assert requests_with(fake_llm, "STEER-PURPLE") == 1
    # "pi is typing…" in the thread while the agent worked.
    assert any(t.channel_id == thread.id for t in fake.typing)
    assert fake.limited == []


async def test_the_stop_command_ends_a_running_tool_and_its_interaction_is_answered_in_time(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    script_long_run(fake_llm, "slowly")
    async with discord_bridge(opts) as fake:
        mention = await fake.user_says(GENERAL, "do it slowly", mentions_bot=True)
        thread = await thread_of(fake, mention)
        await shown(fake, "bash", thread.id)
        used = await fake.slash(thread.id, "stop")
        await shown(fake, "stopped", thread.id)
        await fake.wait_for(lambda: fake.reactions.get(mention.id) == ["✅"], WAIT)
    assert used.answered
    assert not used.failed
    assert fake.find(NOT_REACHED, thread.id) is None
    assert {c["name"] for c in fake.commands[None]} >= {"pi", "stop", "new", "status", "get"}


async def test_a_dangerous_commands_question_is_refused_to_others_and_runs_for_its_owner(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build; echo CLEANED-$((40+2))"})]),
        Reply(text="Finished cleaning."),
    )
    gate = dataclasses.replace(opts, approvals=ApprovalOptions(mode="dangerous"))
    # Bob is let in by his id, Alice (the owner) by her role.
    users, roles = frozenset({str(BOB.id)}), frozenset({str(ROLE_PI_USERS)})
    async with discord_bridge(gate, allowed_users=users, allowed_roles=roles) as fake:
        mention = await fake.user_says(GENERAL, "clean the build", mentions_bot=True)
        thread = await thread_of(fake, mention)
        question = await shown(fake, ASKED, thread.id)
        assert "rm -rf build" in question.content
        allow = button(question, "Allow once")
        refused = await fake.press(question, allow, user=BOB)
        note = await fake.wait_for(
            lambda: next((m for m in fake.messages(thread.id) if m.ephemeral), None), WAIT
        )
        assert "Only the person who started" in note.content
        assert fake.message(question.id).buttons, "a refused press took the buttons"
        pressed = await fake.press(question, allow, user=ALICE)
        await shown(fake, "Finished cleaning.", thread.id)
        await fake.wait_for(lambda: not fake.message(question.id).buttons, WAIT)
    assert not refused.failed
    assert not pressed.failed
    assert "Allow once" in fake.message(question.id).content
    assert any("CLEANED-42" in str(m) for r in fake_llm.requests for m in r.messages)


async def test_deny_with_reason_is_typed_in_a_modal_and_reaches_the_agent(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add(
        "wipe it",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf ./src"})]),
        Reply(text="Kept the sources."),
    )
    gate = dataclasses.replace(opts, approvals=ApprovalOptions(mode="dangerous"))
    async with discord_bridge(gate) as fake:
        mention = await fake.user_says(GENERAL, "wipe it", mentions_bot=True)
        thread = await thread_of(fake, mention)
        question = await shown(fake, ASKED, thread.id)
        pressed = await fake.press(question, button(question, "Deny with reason"))
        form = await fake.wait_for(lambda: next(iter(fake.modals), None), WAIT)
        assert pressed.response_type == 9  # the modal was the press's answer
        [field] = form.fields
        submitted = await fake.submit_modal(form, {field.custom_id: "those are the tests"})
        await shown(fake, "Kept the sources.", thread.id)
        await fake.wait_for(lambda: "Deny with reason" in fake.message(question.id).content)
    assert not pressed.failed
    assert not submitted.failed
    assert any("Denied in the chat: those are the tests" in r for r in tool_results(fake_llm))


async def test_a_stranger_is_refused_where_they_wrote_and_no_thread_is_opened(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("secrets", Reply(text="must not be answered"))
    async with discord_bridge(opts) as fake:
        await fake.user_says(GENERAL, "tell me your secrets", mentions_bot=True, user=BOB)
        told = await shown(fake, "not allowed", GENERAL)
        dm = fake.dm_channel(BOB)
        await fake.user_says(dm, "tell me your secrets", user=BOB)
        await shown(fake, "not allowed", dm)
    assert str(BOB.id) in told.content
    assert fake.threads == []
    assert fake_llm.requests == []


async def test_a_restart_finds_the_thread_again_and_resumes_its_session(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("REMEMBER-KIWI", Reply(text="Kiwi remembered."))
    fake_llm.add("what fruit", Reply(text="It was the kiwi."))
    async with FakeDiscord(enforce_limits=True) as fake:
        async with discord_bridge(opts, on=fake):
            mention = await fake.user_says(GENERAL, "REMEMBER-KIWI please", mentions_bot=True)
            thread = await thread_of(fake, mention)
            await shown(fake, "Kiwi remembered.", thread.id)
            await shown(fake, "done", thread.id)
        async with discord_bridge(opts, on=fake):
            # No mention: the thread is the bridge's, as its store says.
            await fake.user_says(thread.id, "what fruit was it?")
            await shown(fake, "It was the kiwi.", thread.id)
    [later] = [r for r in fake_llm.requests if "what fruit" in r.last_user_text]
    assert any("REMEMBER-KIWI" in str(m) for m in later.messages), "the session was not resumed"
    assert fake.resumes == 0  # a new gateway session, not a RESUME


async def test_slash_pi_in_a_channel_starts_a_thread_on_its_task(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("the flaky test", Reply(text="Fixed the flaky test."))
    async with discord_bridge(opts) as fake:
        used = await fake.slash(GENERAL, "pi", {"text": "fix the flaky test"})
        root = await shown(fake, "asked: fix the flaky test", GENERAL)
        thread = await thread_of(fake, root)
        await shown(fake, "Fixed the flaky test.", thread.id)
        bare = await fake.slash(GENERAL, "status")
        await fake.wait_for(lambda: bare.answered)
    assert not used.failed
    assert used.response_type == 4  # shown in the channel, as a typed message would be
    assert bare.response is not None
    assert bare.response["data"]["flags"] & 64  # told only to its user: no conversation here
    assert [r.last_user_text for r in fake_llm.requests] == ["fix the flaky test"]


async def test_a_direct_message_is_its_own_conversation(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("privately", Reply(text="Answered in the DM."))
    async with discord_bridge(opts) as fake:
        dm = fake.dm_channel(ALICE)
        await fake.user_says(dm, "answer me privately")
        await shown(fake, "Answered in the DM.", dm)
    assert fake.threads == []


@pytest.mark.parametrize(
    ("method", "asked", "typed", "prefilled"),
    [("input", "Branch name?", "feature/kiwi", ""), ("editor", "Edit the note", "", "draft text")],
)
async def test_the_agents_text_question_is_answered_in_a_modal(
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
    method: str,
    asked: str,
    typed: str,
    prefilled: str,
) -> None:
    script_dialog(fake_llm, "branch", "Noted.", method)
    argv = agent_home.argv(DEFAULT_VERSION, "-e", str(ASK_ANSWER))
    opts = options(tmp_path / "data", argv, agent_home.env())
    async with discord_bridge(opts) as fake:
        mention = await fake.user_says(GENERAL, "pick a branch", mentions_bot=True)
        thread = await thread_of(fake, mention)
        dialog = await shown(fake, asked, thread.id)
        pressed = await fake.press(dialog, button(dialog, "Answer"))
        form = await fake.wait_for(lambda: next(iter(fake.modals), None), WAIT)
        [field] = form.fields
        assert (form.title, field.value) == (asked, prefilled)
        values = {field.custom_id: typed} if typed else {}  # the editor's text sent as it was
        await fake.submit_modal(form, values)
        await shown(fake, "Noted.", thread.id)
    assert not pressed.failed
    assert agent_got(fake_llm, typed or prefilled)

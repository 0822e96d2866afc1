"""The queue under the thumb, end to end on Telegram with each real agent: a follow-up
sent while the agent works shows [Steer now] and [Cancel] until the agent takes it.
0.87.1 gets it at once and gives it back with `clear_queue`; 0.73.1 and the legacy
agent never give one back, so the bridge holds it until the run ends.

Every model request the fake LLM received is checked: a cancelled message must be in
none, a pushed one in a request of the same run, before its final answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.dialogs import NO_LONGER_ACTIVE, NOT_YOURS
from bridge.options import AgentOptions, SandboxOptions
from tests.adapters.telegram.test_e2e import CHAT, WAIT, marked, telegram_bot
from tests.conftest import require_agent
from tests.support.agents import AGENT_VERSIONS, LEGACY_VERSION, SUITE_USER, llm_ports
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import UNSTEERED, requests_with

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import FakeTelegram, Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

LATER = "LATER-KIWI"
PUSHED = "Kiwi, as you asked."
MALLORY = {"id": 7, "is_bot": False, "first_name": "Mallory", "username": "mallory"}


def script(llm: FakeLLM, seconds: int = 6) -> None:
    """A run whose tool call lasts long enough to press buttons while it runs."""
    command = f"sleep {seconds}; echo slept"
    llm.add(
        "slowly",
        Reply(text="On it.", tool_calls=[ToolCall("bash", {"command": command})]),
        Reply(text=UNSTEERED),
    )
    llm.add(LATER, Reply(text=PUSHED))
    llm.add("ping", Reply(text="pong"))


def bridge_options(version: str, home: AgentHome, tmp_path: Path) -> BridgeOptions:
    require_agent(version)
    # The legacy agent knows no `--session-dir`: configured as an operator would.
    agent = AgentOptions(
        argv=tuple(home.argv(version)),
        env=home.env(),
        session_flags=version != LEGACY_VERSION,
        sandbox=SandboxOptions(host_ports=llm_ports(home.env()), user=SUITE_USER),
    )
    return options(tmp_path / "data", [], {}, agent=agent)


def token(message: Message, label: str) -> str:
    return next(data for text, data in message.buttons if label in text)


def reached_the_model(llm: FakeLLM, text: str) -> bool:
    return any(text in str(m) for r in llm.requests for m in r.messages)


async def waiting_follow_up(fake: FakeTelegram) -> tuple[Message, Message]:
    """Start the slow run, send a follow-up while its tool runs: (the user's message, the
    bot's message that it waits)."""
    fake.message(CHAT, "do it slowly")
    await fake.bot_message("🔧 bash", CHAT, within=WAIT)
    later = fake.message(CHAT, f">> {LATER} please")
    waiting = await fake.bot_message("waiting for the end of the run", CHAT, within=WAIT)
    assert [label for label, _ in waiting.buttons] == ["➡️ Steer now", "✖ Cancel"]
    return later, waiting


async def answered(fake: FakeTelegram, query: str) -> tuple[str, bool]:
    await fake.wait_for(lambda: query in fake.answers, WAIT)
    return fake.answers[query]


@pytest.mark.parametrize("version", [*AGENT_VERSIONS, LEGACY_VERSION])
async def test_a_cancelled_follow_up_never_reaches_the_model_and_the_run_ends_normally(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm)
    async with telegram_bot(bridge_options(version, agent_home, tmp_path)) as fake:
        later, waiting = await waiting_follow_up(fake)
        await fake.wait_for(marked(fake, later.message_id, "👀"), WAIT)
        cancel = token(waiting, "Cancel")
        # Someone who neither started the conversation nor approves: refused, in private.
        refused = fake.press(CHAT, waiting.message_id, cancel, user=MALLORY)
        assert await answered(fake, refused) == (NOT_YOURS, True)
        assert fake.messages[(CHAT, waiting.message_id)].buttons == waiting.buttons
        assert await answered(fake, fake.press(CHAT, waiting.message_id, cancel)) == (
            "Cancelled.",
            False,
        )
        assert fake.find(UNSTEERED, CHAT) is None, "pressed too late to show anything"
        await fake.bot_message(f"✖ cancelled by Alice: “{LATER} please”", CHAT, within=WAIT)
        assert fake.messages[(CHAT, waiting.message_id)].buttons == []
        await fake.wait_for(marked(fake, later.message_id, "👎"), WAIT)
        # A second press on it changes nothing.
        again = fake.press(CHAT, waiting.message_id, cancel)
        assert (await answered(fake, again))[0] == NO_LONGER_ACTIVE
        await fake.bot_message(UNSTEERED, CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        # A next run: a follow-up still waiting somewhere would have gone in before it.
        fake.message(CHAT, "ping")
        await fake.bot_message("pong", CHAT, within=WAIT)
    assert not reached_the_model(fake_llm, LATER)
    assert requests_with(fake_llm, "ping") == 1


@pytest.mark.parametrize("version", AGENT_VERSIONS)
async def test_steer_now_brings_a_follow_up_into_the_run_before_its_final_answer(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm)
    async with telegram_bot(bridge_options(version, agent_home, tmp_path)) as fake:
        later, waiting = await waiting_follow_up(fake)
        query = fake.press(CHAT, waiting.message_id, token(waiting, "Steer now"))
        assert await answered(fake, query) == ("Sent now.", False)
        await fake.bot_message(f"✔ taken by the agent: “{LATER} please”", CHAT, within=WAIT)
        await fake.bot_message(PUSHED, CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        await fake.wait_for(marked(fake, later.message_id, "👍"), WAIT)
        assert fake.messages[(CHAT, waiting.message_id)].buttons == []
        assert fake.find(UNSTEERED, CHAT) is None
    [pushed] = [r for r in fake_llm.requests if LATER in r.last_user_text]
    # The same run: after its tool's result, and its own final answer never asked for.
    assert any("slept" in str(m) for m in pushed.messages)
    assert not [r for r in fake_llm.requests if r.rule == "slowly" and r.step == 1]


@pytest.mark.parametrize("version", AGENT_VERSIONS)
async def test_queue_lists_waiting_follow_ups_with_buttons_and_clear_withdraws_them(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script(fake_llm, seconds=10)  # several messages and presses go by while it runs
    async with telegram_bot(bridge_options(version, agent_home, tmp_path)) as fake:
        _, waiting = await waiting_follow_up(fake)
        fake.message(CHAT, ">> SECOND-FIG too")
        await fake.bot_message("“SECOND-FIG too”", CHAT, within=WAIT)
        fake.message(CHAT, "/queue")
        listed = await fake.bot_message("Waiting:", CHAT, within=WAIT)
        assert listed.text.splitlines()[1:] == [
            f"1. ⏭ waiting for the end of the run: “{LATER} please”",
            "2. ⏭ waiting for the end of the run: “SECOND-FIG too”",
        ]
        labels = [label for label, _ in listed.buttons]
        assert labels == ["➡️ Steer now 1", "✖ Cancel 1", "➡️ Steer now 2", "✖ Cancel 2"]
        # A press in the list acts on the message, and both show it.
        fake.press(CHAT, listed.message_id, token(listed, "Cancel 1"))
        await fake.bot_message(f"✖ cancelled by Alice: “{LATER} please”", CHAT, within=WAIT)
        await fake.wait_for(
            lambda: "1. ✖ cancelled by Alice" in fake.messages[(CHAT, listed.message_id)].text
        )
        assert fake.messages[(CHAT, waiting.message_id)].buttons == []
        fake.message(CHAT, "/queue clear")
        await fake.bot_message("Queue cleared", CHAT, within=WAIT)
        await fake.bot_message("✖ cleared with /queue clear: “SECOND-FIG too”", CHAT, within=WAIT)
        await fake.bot_message(UNSTEERED, CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        fake.message(CHAT, "ping")
        await fake.bot_message("pong", CHAT, within=WAIT)
    assert not reached_the_model(fake_llm, LATER)
    assert not reached_the_model(fake_llm, "SECOND-FIG")

"""Telegram end to end: fake Bot API → real python-telegram-bot → `serve` → real `Bridge`
→ real pi agent (against the scripted fake LLM) → `TelegramAdapter` → fake Bot API.

The fake enforces Telegram's pacing (1 s between edits of a private message), so
these journeys also show the bridge's outbox keeps to the adapter's limits.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from adapters.telegram.runner import serve
from adapters.telegram.settings import TelegramSettings
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import TOKEN, FakeTelegram

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.model import Adapter
    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

CHAT = 42  # Alice's private chat (Alice is the harness's OWNER, id 42)
FORUM, TOPIC = -1005678, 3  # a forum supergroup and one of its topics
WAIT = 30.0
# A one-pixel PNG (the fake LLM counts images, it does not decode them).
PNG_PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63f8ffff3f0005fe02fea7d6a4f30000000049454e44ae426082"
)


@pytest.fixture
def opts(agent_home: AgentHome, tmp_path: Path) -> BridgeOptions:
    from tests.conftest import require_agent

    require_agent(DEFAULT_VERSION)
    return options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())


@contextlib.asynccontextmanager
async def bridge_for(adapter: Adapter, bot_name: str, opts: BridgeOptions) -> AsyncIterator[Bridge]:
    store = await open_store("sqlite", opts.data_dir)
    try:
        async with Bridge(adapter, store, opts, bot_name=bot_name) as bridge:
            yield bridge
    finally:
        await store.aclose()


@contextlib.asynccontextmanager
async def telegram_bot(opts: BridgeOptions) -> AsyncIterator[FakeTelegram]:
    """The fake Bot API with the whole bridge polling it, stopped on exit."""
    async with FakeTelegram(enforce_limits=True) as fake:
        settings = TelegramSettings(
            token=TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url, poll_timeout=1
        )
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: serve(settings, lambda a, name: bridge_for(a, name, opts), stop=stop)
            )
            try:
                yield fake
            finally:
                stop.set()


def edits_of(fake: FakeTelegram, message_id: int) -> list[str]:
    return [
        str(c.params.get("text"))
        for c in fake.calls_of("editMessageText")
        if c.params.get("message_id") == message_id and c.params.get("chat_id") == CHAT
    ]


async def test_a_private_prompt_streams_into_an_edited_message_ending_with_the_answer(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    answer = "The answer is forty two, and here is why it matters so much today."
    fake_llm.add("question", Reply(text=answer, delay=0.25))
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "a question for you")
        message = await fake.bot_message("matters so much today.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
    assert message.text.strip() == answer
    assert not [e for e in fake.errors if "Too Many Requests" in e[1]], fake.errors
    assert edits_of(fake, message.message_id), "the answer was not streamed by edits"


async def test_a_tool_call_ends_with_a_check_mark(fake_llm: FakeLLM, opts: BridgeOptions) -> None:
    fake_llm.add(
        "greet",
        Reply(tool_calls=[ToolCall("bash", {"command": "echo hello-from-bash"})]),
        Reply(text="Greeted."),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "greet the world")
        tool = await fake.bot_message("✅", CHAT, within=WAIT)
        await fake.bot_message("Greeted.", CHAT, within=WAIT)
    assert "bash" in tool.text


async def test_stop_ends_a_running_tool(fake_llm: FakeLLM, opts: BridgeOptions) -> None:
    fake_llm.add(
        "long job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 30"})]),
        Reply(text="never"),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "start the long job")
        await fake.bot_message("🔧 bash", CHAT, within=WAIT)
        fake.message(CHAT, "/stop@pi_test_bot")
        await fake.bot_message("stopped", CHAT, within=10)
    assert fake.find("never", CHAT) is None


async def test_the_stop_button_on_the_status_message_ends_the_run(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add(
        "slow job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 30"})]),
        Reply(text="never"),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "run the slow job")
        await fake.bot_message("🔧 bash", CHAT, within=WAIT)
        status = next(m for m in fake.bot_messages(CHAT) if any("Stop" in b for b, _ in m.buttons))
        [(_, token)] = [b for b in status.buttons if "Stop" in b[0]]
        query = fake.press(CHAT, status.message_id, token)
        await fake.bot_message("stopped", CHAT, within=10)
        await fake.wait_for(lambda: query in fake.answers, within=10)


async def test_a_mention_in_a_forum_topic_is_answered_in_that_topic(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("topic question", Reply(text="Answered in the topic."))
    async with telegram_bot(opts) as fake:
        fake.message(FORUM, "just chatting", thread_id=TOPIC)
        fake.message(FORUM, "@pi_test_bot a topic question", thread_id=TOPIC)
        answer = await fake.bot_message("Answered in the topic.", FORUM, within=WAIT)
        await fake.bot_message("✅ done", FORUM, within=WAIT)
    assert answer.thread_id == TOPIC
    assert all(m.thread_id == TOPIC for m in fake.bot_messages(FORUM))
    assert [r.last_user_text for r in fake_llm.requests] == ["a topic question"]


async def test_a_photo_reaches_the_agent_as_an_image(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("this picture", Reply(text="A picture of a cat."))
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "what is in this picture?", photo=PNG_PIXEL)
        await fake.bot_message("A picture of a cat.", CHAT, within=WAIT)
    [request] = [r for r in fake_llm.requests if "this picture" in r.last_user_text]
    assert request.n_images == 1

"""Telegram end to end: fake Bot API → real python-telegram-bot → `serve` → real `Bridge`
→ real pi agent (against the scripted fake LLM) → `TelegramAdapter` → fake Bot API.

The fake enforces Telegram's pacing (1 s between edits of a private message), so
these journeys also show the bridge's outbox keeps to the adapter's limits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import unicodedata
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from adapters.telegram.runner import serve
from adapters.telegram.settings import Streaming, TelegramSettings
from bridge.options import Transcription
from bridge.paths import SEND_FILE_EXTENSION
from bridge.service import Bridge
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import SECRET, TOKEN, FakeTelegram
from tests.support.fake_transcribe import FakeTranscriber
from tests.support.flaky_store import open_flaky
from tests.support.journeys import (
    ASK_ANSWER,
    STEERED,
    UNSTEERED,
    agent_got,
    requests_with,
    script_dialog,
)
from tests.support.loopback import free_port
from tests.support.voice import spoken_ogg

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

CHAT = 42  # Alice's private chat (Alice is the harness's OWNER, id 42)
FORUM, TOPIC = -1005678, 3  # a forum supergroup and one of its topics
WAIT = 60.0  # generous: real agents start slowly on a busy two-core CI machine
# A one-pixel PNG (the fake LLM counts images, it does not decode them).
PNG_PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63f8ffff3f0005fe02fea7d6a4f30000000049454e44ae426082"
)


@contextlib.asynccontextmanager
async def bridge_for(
    adapter: Adapter,
    bot_name: str,
    opts: BridgeOptions,
    failures: int = 0,
    lookup_failures: int = 0,
) -> AsyncIterator[Bridge]:
    store = await open_flaky(opts.data_dir, failures, lookup_failures)
    try:
        async with Bridge(adapter, store, opts, bot_name=bot_name) as bridge:
            yield bridge
    finally:
        await store.aclose()


@contextlib.asynccontextmanager
async def telegram_bot(
    opts: BridgeOptions,
    *,
    webhook: bool = False,
    store_failures: int = 0,
    lookup_failures: int = 0,
    streaming: Streaming = "draft",
    refuse_drafts: bool = False,
    on: FakeTelegram | None = None,
) -> AsyncIterator[FakeTelegram]:
    """The fake Bot API with the whole bridge polling it (or, with `webhook`, serving
    a webhook on 127.0.0.1 that the fake's `push()` POSTs to), stopped on exit; `on`: a
    fake already running (a bridge restart keeps Telegram's chats and update ids)."""
    async with contextlib.AsyncExitStack() as stack:
        fake = on
        if fake is None:
            fake = await stack.enter_async_context(FakeTelegram(enforce_limits=True))
        fake.refuse_drafts = refuse_drafts
        hook: dict[str, object] = {}
        if webhook:
            port = free_port()
            hook = {
                "webhook_url": f"http://127.0.0.1:{port}/hook",
                "webhook_secret": SECRET,
                "webhook_port": port,
            }
        settings = TelegramSettings(
            token=TOKEN,
            base_url=fake.base_url,
            base_file_url=fake.base_file_url,
            poll_timeout=1,
            streaming=streaming,
            **hook,  # type: ignore[arg-type]
        )
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: serve(
                    settings,
                    lambda a, name: bridge_for(a, name, opts, store_failures, lookup_failures),
                    stop=stop,
                )
            )
            try:
                if webhook:
                    await fake.wait_for(lambda: fake.webhook)
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
    async with telegram_bot(opts, streaming="edit") as fake:
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
        asked = fake.message(CHAT, "greet the world")
        tool = await fake.bot_message("✅", CHAT, within=WAIT)
        await fake.bot_message("Greeted.", CHAT, within=WAIT)
        await fake.wait_for(marked(fake, asked.message_id, "👍"), WAIT)
    assert "bash" in tool.text
    reacted = [c.params.get("reaction") for c in fake.calls_of("setMessageReaction")]
    assert [r[0]["emoji"] for r in reacted if r] == ["👀", "👍"]


def marked(fake: FakeTelegram, message_id: int, emoji: str) -> Callable[[], bool]:
    """Whether the user's message in CHAT carries the bot's `emoji` (and only it)."""
    return lambda: fake.reactions.get((CHAT, message_id)) == [emoji]


async def test_messages_sent_while_the_agent_works_steer_it_or_follow_up_and_are_marked(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    # The tool runs long enough for both messages to arrive while it does.
    fake_llm.add(
        "slowly",
        Reply(text="On it.", tool_calls=[ToolCall("bash", {"command": "sleep 5; echo slept"})]),
        Reply(text=UNSTEERED),
    )
    fake_llm.add("STEER-PURPLE", Reply(text=STEERED))
    fake_llm.add("LATER-GREEN", Reply(text="Green comes after."))
    async with telegram_bot(opts) as fake:
        asked = fake.message(CHAT, "do it slowly")
        await fake.bot_message("🔧 bash", CHAT, within=WAIT)
        steer = fake.message(CHAT, "STEER-PURPLE instead")
        later = fake.message(CHAT, ">> LATER-GREEN also")
        for message in (steer, later):  # each shows at once that it reached the run
            await fake.wait_for(marked(fake, message.message_id, "👀"), WAIT)
        await fake.bot_message(STEERED, CHAT, within=WAIT)
        await fake.bot_message("Green comes after.", CHAT, within=WAIT)
        for message in (asked, steer, later):  # and how the run ended, once it has
            await fake.wait_for(marked(fake, message.message_id, "👍"), WAIT)
    assert fake.find(UNSTEERED, CHAT) is None
    assert requests_with(fake_llm, "STEER-PURPLE") == 1
    assert requests_with(fake_llm, "LATER-GREEN") == 1


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


async def test_an_input_dialog_is_answered_by_a_reply_after_its_answer_button(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    from tests.conftest import require_agent
    from tests.support.fake_telegram import Message

    require_agent(DEFAULT_VERSION)
    argv = agent_home.argv(DEFAULT_VERSION, "-e", str(ASK_ANSWER))
    opts = options(tmp_path / "data", argv, agent_home.env())
    for keyword in ("first branch", "second branch"):
        script_dialog(fake_llm, keyword, f"Noted the {keyword}.")

    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "pick the first branch")
        dialog = await fake.bot_message("Branch name?", CHAT, within=WAIT)
        [(_, answer)] = [b for b in dialog.buttons if "Answer" in b[0]]
        fake.press(CHAT, dialog.message_id, answer)
        prompt = await fake.bot_message("Reply to this message", CHAT, within=WAIT)
        assert (prompt.reply_markup or {}).get("force_reply") is True
        fake.message(CHAT, "feature/kiwi", reply_to=prompt.message_id)
        await fake.bot_message("Noted the first branch.", CHAT, within=WAIT)
        assert agent_got(fake_llm, "feature/kiwi")
        # Cancel still works on the next dialog.
        fake.message(CHAT, "now the second branch")

        def second_dialog() -> Message | None:
            asking = (m for m in fake.bot_messages(CHAT) if "Branch name?" in m.text and m.buttons)
            return next((m for m in asking if m.message_id != dialog.message_id), None)

        await fake.wait_for(second_dialog, within=WAIT)
        second = second_dialog()
        assert second is not None
        [(_, cancel)] = [b for b in second.buttons if "Cancel" in b[0]]
        fake.press(CHAT, second.message_id, cancel)
        await fake.bot_message("Noted the second branch.", CHAT, within=WAIT)
    assert agent_got(fake_llm, "<cancelled>")


async def test_a_webhook_update_with_the_secret_reaches_the_agent_and_is_answered(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("webhook question", Reply(text="Answered through the webhook."))
    async with telegram_bot(opts, webhook=True) as fake:
        fake.message(CHAT, "a webhook question")
        assert await fake.push() == [200]
        await fake.bot_message("Answered through the webhook.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
    assert [r.last_user_text for r in fake_llm.requests] == ["a webhook question"]
    assert not fake.calls_of("getUpdates")


async def test_a_webhook_update_without_the_secret_reaches_nothing(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("forged", Reply(text="must not be answered"))
    async with telegram_bot(opts, webhook=True) as fake:
        fake.message(CHAT, "a forged question")
        assert await fake.push(secret="not the secret") == [403]
        assert await fake.push(secret="") == [403]
        await anyio.sleep(0.5)  # time enough for a wrongly taken update to start a run
    assert fake_llm.requests == []
    assert fake.bot_messages(CHAT) == []


async def test_start_from_a_new_user_is_answered_with_the_help_text_not_by_the_agent(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "/start")
        await fake.bot_message("Talking to the agent", CHAT, within=WAIT)
    assert fake_llm.requests == []
    assert {c["command"] for c in fake.commands} >= {"policy", "verbose", "help"}


# --- files: fetched after admission, off the update loop, within their size --------------

EVE_ID, BOB_ID = 666, 43
EVE: dict[str, Any] = {"id": EVE_ID, "is_bot": False, "first_name": "Eve", "username": "eve"}
BOB: dict[str, Any] = {"id": BOB_ID, "is_bot": False, "first_name": "Bob", "username": "bob"}


async def test_photos_of_strangers_and_of_edits_are_never_fetched(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("QUICK", Reply(text="Quick answer."))
    opts = dataclasses.replace(opts, allowed_users=frozenset({str(CHAT)}))
    async with telegram_bot(opts) as fake:
        fake.file_delay = 2.0
        for _ in range(4):
            fake.message(EVE_ID, "look at this", photo=PNG_PIXEL, user=EVE)
        quick = fake.message(CHAT, "a QUICK one")
        await fake.bot_message("Quick answer.", CHAT, within=WAIT)
        await fake.bot_message("not allowed", EVE_ID, within=WAIT)
        fake.message(CHAT, "now with a picture", photo=PNG_PIXEL, edit_of=quick.message_id)
        await fake.wait_for(lambda: fake.confirmed > 6, within=WAIT)  # all six handled
    assert fake.downloads == []
    assert not fake.calls_of("getFile")


async def test_a_slow_photo_holds_up_no_other_conversation(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("QUICK", Reply(text="Quick answer."))
    fake_llm.add("this picture", Reply(text="A picture of a cat."))
    opts = dataclasses.replace(opts, allowed_users=frozenset({str(CHAT), str(BOB_ID)}))
    async with telegram_bot(opts) as fake:
        # Long enough for Bob's agent to start and answer on a loaded CI machine.
        fake.file_delay = 10.0
        fake.message(CHAT, "what is in this picture?", photo=PNG_PIXEL)
        await fake.wait_for(lambda: fake.downloads, within=WAIT)  # its download has begun
        fake.message(BOB_ID, "a QUICK one", user=BOB)
        await fake.bot_message("Quick answer.", BOB_ID, within=WAIT)
        # Bob was answered while Alice's photo was still on its way.
        assert not [d for d in fake.downloads if d.startswith("done:")]
        await fake.bot_message("A picture of a cat.", CHAT, within=WAIT)
    [request] = [r for r in fake_llm.requests if "this picture" in r.last_user_text]
    assert request.n_images == 1


async def test_a_photo_over_the_limit_is_not_fetched_and_its_caption_still_goes_in(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("my caption", Reply(text="Got your caption."))
    async with telegram_bot(opts) as fake:
        fake.announced_size = 25 * 2**20
        fake.message(CHAT, "my caption here", photo=PNG_PIXEL)
        told = await fake.bot_message("Couldn't fetch your image", CHAT, within=WAIT)
        await fake.bot_message("Got your caption.", CHAT, within=WAIT)
    assert "25.0 MB, the limit is 20.0 MB" in told.text
    assert "your text went on without it" in told.text
    assert fake.downloads == []
    [request] = [r for r in fake_llm.requests if "my caption" in r.last_user_text]
    assert request.n_images == 0


# --- the store failing at admission: the update comes again, or the person is told -------


async def test_a_message_the_store_failed_to_take_in_is_delivered_again(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("LOCKED", Reply(text="Got it after all."))
    async with telegram_bot(opts, store_failures=2) as fake:
        fake.message(CHAT, "a LOCKED moment")
        await fake.bot_message("Got it after all.", CHAT, within=WAIT)
        await fake.wait_for(lambda: fake.confirmed > 0, within=WAIT)
    assert requests_with(fake_llm, "a LOCKED moment") == 1
    # Redelivered by Telegram itself: the offset stayed before it until it was taken in.
    assert list(fake.handed.values()) == [3]
    assert fake.find("could not take your message", CHAT) is None


@pytest.mark.parametrize("webhook", [False, True], ids=["polling", "webhook"])
async def test_a_message_the_store_never_takes_in_is_named_not_lost_in_silence(
    fake_llm: FakeLLM, opts: BridgeOptions, webhook: bool
) -> None:
    async with telegram_bot(opts, webhook=webhook, store_failures=1000) as fake:
        fake.message(CHAT, "into the void")
        if webhook:
            assert await fake.push() == [200]
        told = await fake.bot_message("could not take your message", CHAT, within=WAIT)
        if not webhook:  # let go of at last: the next poll confirms it
            await fake.wait_for(lambda: fake.confirmed > 0, within=WAIT)
    assert "Please send it again" in told.text
    assert requests_with(fake_llm, "into the void") == 0


async def test_a_message_whose_conversation_the_store_could_not_open_is_delivered_again(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    # The delivery id is already remembered when opening the conversation fails: the
    # update that Telegram hands out again must not be dropped as a duplicate.
    fake_llm.add("REOPENED", Reply(text="Opened after all."))
    async with telegram_bot(opts, lookup_failures=2) as fake:
        fake.message(CHAT, "a REOPENED door")
        await fake.bot_message("Opened after all.", CHAT, within=WAIT)
        await fake.wait_for(lambda: fake.confirmed > 0, within=WAIT)
    assert requests_with(fake_llm, "a REOPENED door") == 1
    assert list(fake.handed.values()) == [3]  # two failed admissions, then taken in
    assert fake.find("could not take your message", CHAT) is None


async def test_a_message_whose_conversation_the_store_never_opens_is_named_not_lost(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    async with telegram_bot(opts, lookup_failures=1000) as fake:
        fake.message(CHAT, "a door that stays shut")
        told = await fake.bot_message("could not take your message", CHAT, within=WAIT)
        await fake.wait_for(lambda: fake.confirmed > 0, within=WAIT)
    assert "Please send it again" in told.text
    assert requests_with(fake_llm, "a door that stays shut") == 0


# --- files a person sends -------------------------------------------------------------

LOG = b"error: the build failed at step 3\nFILE-CONTENT-OK\n"


def _inbox(opts: BridgeOptions) -> Path:
    return opts.workspace(f"tg:{CHAT}") / "inbox"


async def test_a_file_without_a_caption_lands_in_the_inbox_and_the_agent_reads_it(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add(
        "A file arrived",
        Reply(tool_calls=[ToolCall("read", {"path": "inbox/build.log"})]),
        Reply(text="The build failed at step 3."),
    )
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "", document=("../../build.log", LOG, "text/plain"))
        await fake.bot_message("The build failed at step 3.", CHAT, within=WAIT)
    assert (_inbox(opts) / "build.log").read_bytes() == LOG  # unchanged, name made safe
    asked = [r.last_user_text for r in fake_llm.requests if "A file arrived" in r.last_user_text]
    assert asked
    assert "inbox/build.log" in asked[0]
    assert any("FILE-CONTENT-OK" in str(m) for r in fake_llm.requests for m in r.messages)


async def test_a_file_over_the_limit_is_refused_clearly_and_nothing_is_written(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("my caption", Reply(text="Caption noted."))
    small = dataclasses.replace(opts, file_max_bytes=16)
    async with telegram_bot(small) as fake:
        fake.message(CHAT, "my caption", document=("big.log", LOG, "text/plain"))
        refusal = await fake.bot_message("Couldn't take your file", CHAT, within=WAIT)
        await fake.bot_message("Caption noted.", CHAT, within=WAIT)
    assert "the limit is" in refusal.text
    assert not _inbox(opts).exists() or list(_inbox(opts).iterdir()) == []


async def test_a_file_over_the_cloud_bot_apis_20_mb_says_so(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    huge = b"x" * (20 * 2**20 + 1)
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "", document=("huge.bin", huge, "application/octet-stream"))
        refusal = await fake.bot_message("Couldn't take your file", CHAT, within=WAIT)
    assert "20 MB" in refusal.text
    assert "local Bot API server" in refusal.text
    assert not _inbox(opts).exists() or list(_inbox(opts).iterdir()) == []
    assert fake_llm.requests == []


async def test_a_file_with_a_hostile_name_is_saved_under_a_clean_one(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    hostile = "\u202e" + "\u05e9\u05dc\u05d5\u05dd\x00\x07" * 30 + "../evil.txt"
    assert len(hostile.encode()) >= 300
    fake_llm.add("A file arrived", Reply(text="Noted the file."))
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "", document=(hostile, LOG, "text/plain"))
        await fake.bot_message("Noted the file.", CHAT, within=WAIT)
    [saved] = list(_inbox(opts).iterdir())
    assert saved.read_bytes() == LOG
    assert saved.name == "evil.txt"  # only the last path component, cleaned
    said = next(r.last_user_text for r in fake_llm.requests if "A file arrived" in r.last_user_text)
    assert "inbox/evil.txt" in said
    assert not any(unicodedata.category(c).startswith("C") for c in said)


async def test_an_empty_file_is_saved_empty_and_the_agent_is_told(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("A file arrived", Reply(text="An empty file."))
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "what is this?", document=("empty.txt", b"", "text/plain"))
        await fake.bot_message("An empty file.", CHAT, within=WAIT)
    assert (_inbox(opts) / "empty.txt").read_bytes() == b""
    said = next(r.last_user_text for r in fake_llm.requests if "A file arrived" in r.last_user_text)
    assert "inbox/empty.txt (0 bytes)" in said
    assert said.endswith("what is this?")  # the caption is the message


async def test_a_download_cut_half_way_leaves_no_file_and_says_so(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    async with telegram_bot(opts) as fake:
        fake.cut_after = 10
        fake.message(CHAT, "", document=("cut.log", LOG, "text/plain"))
        told = await fake.bot_message("Couldn't take your file", CHAT, within=WAIT)
    assert "could not be fetched" in told.text
    assert "nothing was sent" in told.text
    assert not _inbox(opts).exists() or list(_inbox(opts).iterdir()) == []
    assert fake_llm.requests == []


async def test_get_sends_a_workspace_file_unchanged_and_nothing_outside_it(
    fake_llm: FakeLLM, opts: BridgeOptions, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"NOT-FOR-THE-CHAT")
    fake_llm.add("A file arrived", Reply(text="Saved it."))
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "", document=("notes.bin", bytes(range(256)), "application/x-raw"))
        await fake.bot_message("Saved it.", CHAT, within=WAIT)
        (_inbox(opts) / "out").symlink_to(secret)  # a link out of the workspace
        fake.message(CHAT, "/get inbox/notes.bin")
        sent = await fake.bot_message("inbox/notes.bin", CHAT, within=WAIT)
        for asked in ("../../secret.txt", str(secret), "inbox/out"):
            fake.message(CHAT, f"/get {asked}")
            await fake.bot_message("sends only files inside", CHAT, within=WAIT)
        fake.message(CHAT, "/get inbox/nothing.txt")
        await fake.bot_message("No file inbox/nothing.txt", CHAT, within=WAIT)
        refusals = [m for m in fake.bot_messages(CHAT) if "sends only files inside" in m.text]
    assert sent.document == bytes(range(256))  # the bytes unchanged
    assert sent.filename == "notes.bin"
    assert len(refusals) == 3
    assert not any(m.document and b"NOT-FOR" in m.document for m in fake.bot_messages(CHAT))


# --- files the agent sends -----------------------------------------------------------


async def test_the_agents_send_file_reaches_the_chat_unchanged_and_nothing_outside_does(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    report = "REPORT-42 \u00e9\u00e8 line one\nline two\n"
    secret = tmp_path / "secret.txt"  # outside the workspace (data/workspaces/<key>)
    secret.write_bytes(b"NOT-FOR-THE-CHAT")
    fake_llm.add(
        "make the report",
        Reply(tool_calls=[ToolCall("write", {"path": "out/report.txt", "content": report})]),
        Reply(tool_calls=[ToolCall("send_file", {"path": "out/report.txt", "caption": "Here."})]),
        Reply(tool_calls=[ToolCall("bash", {"command": f"ln -s {secret} leak"})]),
        Reply(tool_calls=[ToolCall("send_file", {"path": "leak"})]),
        Reply(tool_calls=[ToolCall("send_file", {"path": "../../../secret.txt"})]),
        Reply(text="All sent."),
    )
    argv = agent_home.argv(version, "-e", str(SEND_FILE_EXTENSION))
    opts = options(tmp_path / "data", argv, agent_home.env())
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "make the report please")
        await fake.bot_message("All sent.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        documents = [m for m in fake.bot_messages(CHAT) if m.document is not None]
    sent = [m for m in documents if m.filename == "report.txt"]
    assert [m.document for m in sent] == [report.encode()]  # the bytes, unchanged, once
    assert sent[0].text == "Here."
    assert not any(b"NOT-FOR" in (m.document or b"") for m in documents)  # no link, no ..


# --- voice notes ----------------------------------------------------------------------


async def test_a_voice_note_is_transcribed_shown_and_steers_the_running_task(
    fake_llm: FakeLLM, opts: BridgeOptions, tmp_path: Path
) -> None:
    # A run long enough for the clip's fetch and transcription under load: a steer that
    # reaches pi 0.73.1 just as its run ends waits in its queue for the next prompt.
    fake_llm.add(
        "slowly",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 6; echo slept"})]),
        Reply(text=UNSTEERED),
    )
    fake_llm.add("STEER-PURPLE", Reply(text=STEERED))
    clip = spoken_ogg("steer purple instead", tmp_path)
    async with FakeTranscriber(transcript="STEER-PURPLE instead") as heard:
        service = Transcription(heard.url, "whisper-1", heard.key)
        async with telegram_bot(dataclasses.replace(opts, transcribe=service)) as fake:
            fake.message(CHAT, "do it slowly")
            await fake.bot_message("bash", CHAT, within=WAIT)  # the run is working
            fake.message(CHAT, "", voice=clip)
            shown = await fake.bot_message("🎤 STEER-PURPLE instead", CHAT, within=WAIT)
            await fake.bot_message(STEERED, CHAT, within=WAIT)
    [taken] = heard.clips
    assert taken.data == clip  # the real clip, as Telegram served it
    assert taken.model == "whisper-1"
    assert taken.name.endswith(".ogg")
    assert shown.text == "🎤 STEER-PURPLE instead"
    assert requests_with(fake_llm, "STEER-PURPLE instead") == 1
    assert [p.read_bytes() for p in _inbox(opts).iterdir()] == [clip]  # kept as well


async def test_a_voice_note_without_transcription_says_how_and_is_kept(
    fake_llm: FakeLLM, opts: BridgeOptions, tmp_path: Path
) -> None:
    clip = spoken_ogg("hello there", tmp_path)
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "", voice=clip)
        told = await fake.bot_message("need a transcription service", CHAT, within=WAIT)
    assert "PI_BRIDGE_TRANSCRIBE_URL" in told.text
    assert "inbox/voice.ogg" in told.text
    assert (_inbox(opts) / "voice.ogg").read_bytes() == clip
    assert fake_llm.requests == []


async def test_an_image_the_agent_sends_is_a_photo_and_one_telegram_refuses_a_file(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "the screenshot",
        Reply(tool_calls=[ToolCall("send_file", {"path": "shot.png"})]),
        Reply(tool_calls=[ToolCall("send_file", {"path": "not-really.png"})]),
        Reply(text="Both sent."),
    )
    argv = agent_home.argv(DEFAULT_VERSION, "-e", str(SEND_FILE_EXTENSION))
    opts = options(tmp_path / "data", argv, agent_home.env())
    workspace = opts.workspace(f"tg:{CHAT}")
    workspace.mkdir(parents=True)
    (workspace / "shot.png").write_bytes(PNG_PIXEL)
    (workspace / "not-really.png").write_bytes(b"plain text, named like a picture")
    async with telegram_bot(opts) as fake:
        fake.message(CHAT, "send me the screenshot")
        await fake.bot_message("Both sent.", CHAT, within=WAIT)
        await fake.bot_message("✅ done", CHAT, within=WAIT)
        sent = fake.bot_messages(CHAT)
    assert [m.photo for m in sent if m.photo is not None] == [PNG_PIXEL]
    documents = [(m.filename, m.document) for m in sent if m.document is not None]
    assert documents == [("not-really.png", b"plain text, named like a picture")]

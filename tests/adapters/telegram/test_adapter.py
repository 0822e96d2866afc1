"""The real python-telegram-bot against the fake Bot API: what `TelegramAdapter`
does to a chat, how Telegram's errors reach the bridge, how polling confirms
updates only after they were handled, and how the webhook takes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.runner import ALLOWED_UPDATES, COMMANDS, make_bot, serve
from adapters.telegram.settings import TelegramSettings
from bridge.model import MAX_ATTACHMENT, AttachmentRefused, Button, ChatRef, Mention, MessageRef
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    TooLong,
    TransientError,
)
from tests.support.fake_telegram import ALICE, BOT_USER, SECRET, TOKEN, FakeTelegram
from tests.support.loopback import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager

    from bridge.model import Inbound, Markup
    from bridge.platform import Adapter

pytestmark = pytest.mark.anyio

CHAT = ChatRef("42")
GROUP = -100777


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def settings(fake: FakeTelegram, **kw: object) -> TelegramSettings:
    return TelegramSettings(
        token=TOKEN,
        base_url=fake.base_url,
        base_file_url=fake.base_file_url,
        poll_timeout=1,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
async def adapter(fake: FakeTelegram) -> AsyncIterator[TelegramAdapter]:
    bot = make_bot(settings(fake))
    async with bot:
        yield TelegramAdapter(bot)


async def test_send_posts_a_message_with_an_inline_keyboard_of_tokens(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    buttons = ((Button("Yes", "tok-yes"), Button("No", "tok-no")),)
    ref = await adapter.send(CHAT, "Run rm -rf build?", buttons=buttons, silent=True)
    shown = fake.messages[(42, int(ref.message_id))]
    assert shown.text == "Run rm -rf build?"
    assert shown.buttons == [("Yes", "tok-yes"), ("No", "tok-no")]
    assert fake.calls_of("sendMessage")[-1].params["disable_notification"] is True
    assert not shown.notified  # only a ping notifies


@pytest.mark.parametrize(
    ("chat", "markup", "text", "shown", "mentions"),
    [
        pytest.param(CHAT, "plain", "done", "done", [], id="private"),
        pytest.param(ChatRef(str(GROUP)), "plain", "done", "Alice done", [42], id="group-plain"),
        pytest.param(
            ChatRef(str(GROUP), "3", is_group=True),
            "formatted",
            "*done*",
            "Alice done",
            [42],
            id="topic-formatted",
        ),
    ],
)
async def test_a_ping_notifies_and_in_a_group_mentions_its_person_by_id(
    fake: FakeTelegram,
    adapter: TelegramAdapter,
    chat: ChatRef,
    markup: Markup,
    text: str,
    shown: str,
    mentions: list[int],
) -> None:
    ref = await adapter.send(chat, text, markup=markup, ping=Mention("42", "Alice"))
    message = fake.messages[(int(chat.chat_id), int(ref.message_id))]
    assert message.notified
    assert message.text == shown
    assert message.mentions == mentions


async def test_formatted_text_is_sent_as_markdown_v2(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    [text] = adapter.format("**Done** in 1.5 s!", adapter.limits.max_text)
    ref = await adapter.send(CHAT, text, markup="formatted")
    shown = fake.messages[(42, int(ref.message_id))]
    assert (shown.parse_mode, shown.text) == ("MarkdownV2", "Done in 1.5 s!")


async def test_force_reply_asks_for_a_reply(fake: FakeTelegram, adapter: TelegramAdapter) -> None:
    await adapter.send(CHAT, "Your name?", force_reply=True)
    markup = fake.calls_of("sendMessage")[-1].params["reply_markup"]
    assert markup["force_reply"] is True


async def test_a_forum_topic_message_goes_to_its_thread(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    ref = await adapter.send(ChatRef(str(GROUP), "5"), "in the topic")
    assert fake.messages[(GROUP, int(ref.message_id))].thread_id == 5


async def test_edit_replaces_text_and_buttons(fake: FakeTelegram, adapter: TelegramAdapter) -> None:
    ref = await adapter.send(CHAT, "working…", buttons=((Button("Stop", "t-stop"),),))
    await adapter.edit(ref, "done · 3 s")
    shown = fake.messages[(42, int(ref.message_id))]
    assert (shown.text, shown.buttons) == ("done · 3 s", [])


async def test_an_edit_to_the_same_text_is_not_modified(adapter: TelegramAdapter) -> None:
    ref = await adapter.send(CHAT, "same")
    with pytest.raises(NotModified):
        await adapter.edit(ref, "same")


async def test_editing_or_deleting_a_missing_message_says_it_is_gone(
    adapter: TelegramAdapter,
) -> None:
    ghost = MessageRef(CHAT, "999")
    with pytest.raises(MessageGone):
        await adapter.edit(ghost, "x")
    with pytest.raises(MessageGone):
        await adapter.delete(ghost)


async def test_delete_removes_the_message(fake: FakeTelegram, adapter: TelegramAdapter) -> None:
    ref = await adapter.send(CHAT, "bye")
    await adapter.delete(ref)
    assert fake.messages[(42, int(ref.message_id))].deleted


async def test_unescaped_markdown_v2_is_bad_formatting(adapter: TelegramAdapter) -> None:
    with pytest.raises(BadFormatting):
        await adapter.send(CHAT, "version 1.5", markup="formatted")


async def test_a_text_over_4096_utf16_units_is_too_long(adapter: TelegramAdapter) -> None:
    with pytest.raises(TooLong):
        await adapter.send(CHAT, "😀" * 2049)  # 2049 characters, 4098 UTF-16 units


async def test_a_429_is_rate_limited_with_its_retry_after(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    fake.fail("sendMessage", "Too Many Requests: retry after 7", status=429, retry_after=7)
    with pytest.raises(RateLimited) as caught:
        await adapter.send(CHAT, "hello")
    assert caught.value.retry_after == 7


async def test_fast_edits_in_a_private_chat_are_rate_limited_by_telegram(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    fake.enforce_limits = True
    ref = await adapter.send(CHAT, "a")
    await adapter.edit(ref, "ab")
    with pytest.raises(RateLimited) as caught:
        await adapter.edit(ref, "abc")
    assert caught.value.retry_after >= 1


async def test_callback_data_over_64_bytes_is_a_permanent_error(adapter: TelegramAdapter) -> None:
    with pytest.raises(PlatformError) as caught:
        await adapter.send(CHAT, "pick", buttons=((Button("A", "x" * 65),),))
    assert caught.value.permanent
    assert "button_data_invalid" in str(caught.value).lower()


async def test_an_unreachable_server_is_transient() -> None:
    async with FakeTelegram() as gone:
        bot = make_bot(settings(gone))
        await bot.initialize()
    try:
        with pytest.raises(TransientError):
            await TelegramAdapter(bot).send(CHAT, "anyone?")
    finally:
        await bot.shutdown()


async def test_answer_press_answers_the_callback_query(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    ref = await adapter.send(CHAT, "pick", buttons=((Button("A", "tok-a"),),))
    query_id = fake.press(42, int(ref.message_id), "tok-a")
    await adapter.answer_press(query_id, "Only the owner may answer.", alert=True)
    assert fake.answers[query_id] == ("Only the owner may answer.", True)
    with pytest.raises(MessageGone):  # a second answer: "query is too old"
        await adapter.answer_press(query_id)


async def test_upload_sends_a_document(fake: FakeTelegram, adapter: TelegramAdapter) -> None:
    ref = await adapter.upload(CHAT, "output.txt", b"line\n" * 1000, caption="bash output")
    shown = fake.messages[(42, int(ref.message_id))]
    assert (shown.filename, shown.document, shown.text) == (
        "output.txt",
        b"line\n" * 1000,
        "bash output",
    )
    assert not shown.notified  # a file is progress, never a ping


async def test_limits_come_from_telegrams_constants(adapter: TelegramAdapter) -> None:
    limits = adapter.limits
    assert (limits.max_text, limits.max_caption, limits.max_button_data) == (4096, 1024, 64)
    assert limits.edit_interval == 1.0


async def test_groups_are_paced_for_telegrams_group_limits_and_private_chats_faster(
    fake: FakeTelegram,
) -> None:
    async with make_bot(settings(fake)) as bot:
        limits = TelegramAdapter(bot).limits
    group, private = ChatRef("-100777", is_group=True), ChatRef("42")
    assert (limits.edit_interval_in(group), limits.edit_interval_in(private)) == (3.0, 1.0)
    assert limits.chat_rate_in(group) == pytest.approx(20 / 60)
    assert limits.chat_rate_in(private) == 1.0


# --- polling ------------------------------------------------------------------------------


class Recorder:
    """Stands in for the bridge: records inbounds; `gate` holds handle() open."""

    def __init__(self) -> None:
        self.inbounds: list[Inbound] = []
        self.gate: anyio.Event | None = None
        self.bot_name = ""
        self.undecodable_updates = 0

    async def handle(self, inbound: Inbound) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.inbounds.append(inbound)

    def undecodable(self) -> None:
        self.undecodable_updates += 1

    def factory(self, adapter: Adapter, bot_name: str) -> AbstractAsyncContextManager[Recorder]:
        self.bot_name = bot_name
        return self

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_polling_delivers_updates_and_confirms_them_only_after_handling(
    fake: FakeTelegram,
) -> None:
    recorder, stop = Recorder(), anyio.Event()
    recorder.gate = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        first = fake.message(42, "hello")
        await fake.wait_for(lambda: fake.calls_of("getUpdates"))
        # handle() has not returned: no poll may confirm the update meanwhile.
        await anyio.sleep(0.3)
        assert fake.confirmed == 0
        assert [u["update_id"] for u in fake.updates] == [1]
        recorder.gate.set()
        await fake.wait_for(lambda: recorder.inbounds)
        await fake.wait_for(lambda: fake.confirmed == 2)
        fake.message(42, "again")
        await fake.wait_for(lambda: len(recorder.inbounds) == 2)
        stop.set()
    assert [i.text for i in recorder.inbounds] == ["hello", "again"]
    assert recorder.inbounds[0].event_id == f"tg:{BOT_USER['id']}:1"  # under the bot's id
    assert recorder.inbounds[0].sender.id == str(ALICE["id"])
    assert first.message_id == 1
    assert fake.confirmed == 3
    assert recorder.bot_name == "pi_test_bot"
    assert [c["command"] for c in fake.commands] == [name for name, _ in COMMANDS]
    assert all(c.params.get("drop_pending_updates") != "true" for c in fake.calls)


async def test_a_photo_is_handed_over_unfetched_and_fetches_the_largest_size(
    fake: FakeTelegram,
) -> None:
    recorder, stop = Recorder(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        fake.message(42, "what is this?", photo=b"\xff\xd8 full size jpeg")
        await fake.wait_for(lambda: recorder.inbounds)
        # Handed over before any download: the bridge fetches after admission.
        assert not fake.calls_of("getFile")
        [inbound] = recorder.inbounds
        [photo] = inbound.attachments
        assert (photo.mime_type, photo.size) == ("image/jpeg", len(b"\xff\xd8 full size jpeg"))
        assert await photo.fetch(MAX_ATTACHMENT) == b"\xff\xd8 full size jpeg"
        with pytest.raises(AttachmentRefused, match="the limit is"):
            await photo.fetch(4)  # refused by the size getFile announces
        stop.set()
    assert inbound.text == "what is this?"


async def test_a_photo_whose_body_outgrows_the_cap_is_not_read_to_its_end(
    fake: FakeTelegram,
) -> None:
    # The announced size is small; the body that comes is 256 MB, without a length.
    recorder, stop = Recorder(), anyio.Event()
    fake.stream_bytes = 256 * 2**20
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        fake.message(42, "what is this?", photo=b"\xff\xd8 a small jpeg")
        await fake.wait_for(lambda: recorder.inbounds)
        [photo] = recorder.inbounds[0].attachments
        with pytest.raises(AttachmentRefused, match=r"over the limit of 1\.0 MB"):
            await photo.fetch(2**20)
        with anyio.fail_after(10):
            await fake.stream_ended.wait()
        stop.set()
    assert fake.streamed < 64 * 2**20  # given up at the cap (and the socket's buffers)


async def test_group_messages_not_addressed_to_the_bot_are_ignored(fake: FakeTelegram) -> None:
    recorder, stop = Recorder(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        fake.message(GROUP, "just chatting")
        fake.message(GROUP, "@pi_test_bot list the files")
        await fake.wait_for(lambda: recorder.inbounds)
        await fake.wait_for(lambda: fake.confirmed == 3)
        stop.set()
    assert [(i.key, i.text) for i in recorder.inbounds] == [(f"tg:{GROUP}", "list the files")]


async def test_a_poll_answered_with_429_waits_and_polls_again(fake: FakeTelegram) -> None:
    recorder, stop = Recorder(), anyio.Event()
    fake.fail("getUpdates", "Too Many Requests: retry after 1", status=429, retry_after=1)
    fake.message(42, "queued while rate limited")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: recorder.inbounds)
        stop.set()
    assert recorder.inbounds[0].text == "queued while rate limited"


async def test_an_update_not_yet_handled_at_shutdown_is_delivered_after_a_restart(
    fake: FakeTelegram,
) -> None:
    stuck, stop = Recorder(), anyio.Event()
    stuck.gate = anyio.Event()  # never set: handle() is still busy when the bot stops
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), stuck.factory, stop=stop))
        fake.message(42, "sent just before a restart")
        await fake.wait_for(lambda: fake.calls_of("getUpdates"))
        await anyio.sleep(0.2)
        stop.set()
    assert stuck.inbounds == []
    restarted, stop = Recorder(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), restarted.factory, stop=stop))
        await fake.wait_for(lambda: restarted.inbounds)
        stop.set()
    assert [(i.event_id, i.text) for i in restarted.inbounds] == [
        (f"tg:{BOT_USER['id']}:1", "sent just before a restart")
    ]


def undecodable_update(fake: FakeTelegram, text: str) -> int:
    """Queues a message python-telegram-bot cannot decode (a `reply_markup` of `{}`:
    `KeyError: 'inline_keyboard'`); its update_id."""
    body = fake.message(42, text).json()
    fake.updates.pop()  # queued whole: taken back, to be queued broken
    return fake.raw({"message": {**body, "reply_markup": {}}})


async def test_polling_skips_an_update_the_library_cannot_decode_and_confirms_it(
    fake: FakeTelegram,
) -> None:
    recorder, stop = Recorder(), anyio.Event()
    fake.message(42, "before it")
    bad = undecodable_update(fake, "unreadable")
    fake.message(42, "after it")  # in the same getUpdates batch
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: len(recorder.inbounds) == 2)
        await fake.wait_for(lambda: fake.confirmed > bad + 1)
        stop.set()
    assert [i.text for i in recorder.inbounds] == ["before it", "after it"]
    assert recorder.undecodable_updates == 1
    assert fake.handed[bad] == 1


async def test_an_update_the_converter_refuses_is_counted_as_undecodable(
    fake: FakeTelegram,
) -> None:
    recorder, stop = Recorder(), anyio.Event()
    body = fake.message(42, "entities of the wrong shape").json()
    fake.updates.pop()
    fake.raw({"message": {**body, "entities": [{"type": "mention", "offset": "x"}]}})
    fake.message(42, "after it")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: recorder.inbounds)
        stop.set()
    assert [i.text for i in recorder.inbounds] == ["after it"]
    assert recorder.undecodable_updates == 1


# --- webhook ------------------------------------------------------------------------------


def webhook_settings(fake: FakeTelegram) -> TelegramSettings:
    port = free_port()
    return settings(
        fake,
        webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        webhook_secret=SECRET,
        webhook_port=port,
    )


async def test_the_webhook_is_set_with_its_secret_and_answers_before_handling_ends(
    fake: FakeTelegram,
) -> None:
    recorder, stop = Recorder(), anyio.Event()
    recorder.gate = anyio.Event()  # handle() stays busy until the test lets it go
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(webhook_settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: fake.webhook)
        fake.message(42, "first")
        fake.message(42, "second")
        with anyio.fail_after(2):  # 200 at once although the bridge is still busy
            assert await fake.push() == [200, 200]
        stop.set()  # pending handling must still finish
        recorder.gate.set()
    assert [i.text for i in recorder.inbounds] == ["first", "second"]
    assert fake.webhook.endswith("/telegram/hook")
    assert (fake.webhook_secret, fake.webhook_updates) == (SECRET, list(ALLOWED_UPDATES))
    assert not fake.calls_of("getUpdates")
    assert not fake.calls_of("deleteWebhook")  # Telegram keeps the webhook for the next start
    assert [c["command"] for c in fake.commands] == [name for name, _ in COMMANDS]


async def test_a_redelivered_webhook_update_is_handed_over_once(fake: FakeTelegram) -> None:
    recorder, stop = Recorder(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(webhook_settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: fake.webhook)
        fake.message(42, "only once")
        update = dict(fake.updates[0])
        assert await fake.push() == [200]
        fake.updates.append(update)  # Telegram retries when it missed the answer
        assert await fake.push() == [200]
        await fake.wait_for(lambda: recorder.inbounds)
        stop.set()
    assert [i.text for i in recorder.inbounds] == ["only once"]


async def test_a_webhook_request_without_the_right_secret_is_refused(fake: FakeTelegram) -> None:
    recorder, stop = Recorder(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(webhook_settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: fake.webhook)
        fake.message(42, "forged")
        assert await fake.push(secret="wrong") == [403]
        assert await fake.push(secret="") == [403]
        stop.set()
    assert recorder.inbounds == []


async def test_a_webhook_update_the_library_cannot_decode_is_answered_200_and_skipped(
    fake: FakeTelegram,
) -> None:
    recorder, stop = Recorder(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(webhook_settings(fake), recorder.factory, stop=stop))
        await fake.wait_for(lambda: fake.webhook)
        undecodable_update(fake, "unreadable")
        fake.message(42, "after it")
        assert await fake.push() == [200, 200]  # Telegram sends neither again
        await fake.wait_for(lambda: recorder.inbounds)
        stop.set()
    assert [i.text for i in recorder.inbounds] == ["after it"]
    assert recorder.undecodable_updates == 1


async def test_a_webhook_without_a_secret_does_not_start(fake: FakeTelegram) -> None:
    # `TelegramSettings` refuses a webhook without its secret, so `serve` never gets one.
    with pytest.raises(ValueError, match="webhook_secret"):
        settings(fake, webhook_url="https://bot.example/hook")
    assert not fake.calls


async def test_a_users_message_shows_eyes_while_working_then_a_thumb_for_the_outcome(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    asked = fake.message(int(CHAT.chat_id), "do it")
    await adapter.react(CHAT, str(asked.message_id), "working")
    assert fake.reactions[(asked.chat_id, asked.message_id)] == ["👀"]
    await adapter.react(CHAT, str(asked.message_id), "done")
    assert fake.reactions[(asked.chat_id, asked.message_id)] == ["👍"]
    await adapter.react(CHAT, str(asked.message_id), "failed")
    assert fake.reactions[(asked.chat_id, asked.message_id)] == ["👎"]


async def test_a_chat_without_reactions_or_a_gone_message_stays_unmarked_quietly(
    fake: FakeTelegram, adapter: TelegramAdapter
) -> None:
    fake.reactions_off.add(GROUP)
    asked = fake.message(GROUP, "do it")
    await adapter.react(ChatRef(str(GROUP), is_group=True), str(asked.message_id), "working")
    await adapter.react(CHAT, "99999", "done")
    assert not fake.reactions
    fake.fail("setMessageReaction", "Forbidden: bot was blocked by the user", status=403)
    with pytest.raises(PlatformError):
        await adapter.react(CHAT, str(asked.message_id), "done")

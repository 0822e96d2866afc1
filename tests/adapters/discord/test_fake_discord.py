"""The fake Discord, driven by the real discord.py client: what a bot sees (READY, the
guild, messages with or without the message-content intent, interactions) and what the
fake records of what the bot does, with Discord's refusals (50035, 40005, 429, 10062…).
The Discord adapter is tested against this fake, so each behaviour here must be Discord's.
"""

from __future__ import annotations

import asyncio
import io
import time
from typing import TYPE_CHECKING

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands

from tests.adapters.discord.conftest import make_client, running
from tests.support.fake_discord import (
    ALICE,
    APP_ID,
    BOB,
    BOT,
    FORUM,
    FORUM_TAGS,
    GENERAL,
    GUILD_ID,
    RANDOM,
    ROLE_PI_USERS,
    TOKEN,
    FakeDiscord,
)
from tests.support.fake_discord_model import ANSWER_WITHIN, EPHEMERAL, LOADING
from tests.support.recording_adapter import FakeClock

if TYPE_CHECKING:
    from tests.support.fake_discord import Message

pytestmark = pytest.mark.anyio

WAIT = 5.0


def text_channel(client: discord.Client, channel_id: int) -> discord.TextChannel:
    channel = client.get_channel(channel_id)
    assert isinstance(channel, discord.TextChannel)
    return channel


class Inbox:
    """The messages a client's on_message saw."""

    def __init__(self, client: discord.Client) -> None:
        self.seen: list[discord.Message] = []
        self.arrived = asyncio.Event()

        @client.event
        async def on_message(message: discord.Message) -> None:
            self.seen.append(message)
            self.arrived.set()

    async def next(self, fake: FakeDiscord, sent: Message) -> discord.Message:
        return await fake.wait_for(lambda: next((m for m in self.seen if m.id == sent.id), None))


# --- connecting -----------------------------------------------------------------------


async def test_the_bot_logs_in_and_gets_ready_with_the_guild(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        assert client.user is not None
        assert client.user.id == BOT.id
        assert client.application_id == APP_ID
        guild = client.get_guild(GUILD_ID)
        assert guild is not None
        assert {c.name for c in guild.text_channels} == {"general", "random"}
        assert isinstance(guild.get_channel(FORUM), discord.ForumChannel)
        alice = guild.get_member(ALICE.id)
        assert alice is not None
        assert [r.id for r in alice.roles if not r.is_default()] == [ROLE_PI_USERS]
        assert guild.get_member(BOB.id) is not None
    identify = fake.identified[0]
    assert identify["intents"] & (1 << 15)  # the message-content intent was asked for
    assert "token" not in identify
    assert [c.path for c in fake.calls[:2]] == ["/users/@me", "/oauth2/applications/@me"]


async def test_the_gateway_speaks_zlib_stream_and_acknowledges_heartbeats(
    fake: FakeDiscord,
) -> None:
    async with running(make_client()) as client:
        await fake.wait_for(lambda: fake.gateway.heartbeats)
        assert client.latency < 1.0  # a heartbeat was acknowledged
    [connection] = fake.gateway.connections
    assert connection == {"v": "10", "encoding": "json", "compress": "zlib-stream"}


async def test_discord_py_is_pointed_at_the_fake_only_while_it_is_open() -> None:
    before = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    async with FakeDiscord() as fake:
        pointed = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        assert pointed == (fake.api_url, yarl.URL(fake.gateway_url))
    after = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    assert after == before


async def test_a_wrong_token_is_refused_at_login(fake: FakeDiscord) -> None:
    client = make_client()
    async with client:
        with pytest.raises(discord.LoginFailure):
            await client.login("not-the-token")


async def test_a_privileged_intent_not_enabled_for_the_app_closes_the_gateway() -> None:
    async with FakeDiscord(privileged_intents=frozenset({"members"})):
        with pytest.raises(discord.PrivilegedIntentsRequired):
            async with running(make_client(content=True)):
                pass


async def test_after_a_reconnect_the_bot_resumes_and_gets_what_it_missed(
    fake: FakeDiscord,
) -> None:
    client = make_client()
    inbox = Inbox(client)
    async with running(client):
        await fake.request_reconnect()
        sent = await fake.user_says(GENERAL, "said while the bot was away")
        seen = await inbox.next(fake, sent)
        assert seen.content == "said while the bot was away"
        assert fake.resumes == 1
        assert len(fake.identified) == 1  # resumed, not identified again


# --- what the bot is shown ---------------------------------------------------------------


async def test_a_mention_arrives_with_its_content_even_without_the_content_intent(
    fake: FakeDiscord,
) -> None:
    client = make_client(content=False)
    inbox = Inbox(client)
    async with running(client):
        sent = await fake.user_says(GENERAL, "why does the build fail?", mentions_bot=True)
        seen = await inbox.next(fake, sent)
    assert seen.content == f"<@{BOT.id}> why does the build fail?"
    assert client.user in seen.mentions
    assert isinstance(seen.author, discord.Member)
    assert seen.author.get_role(ROLE_PI_USERS) is not None


async def test_without_the_content_intent_other_guild_messages_arrive_empty(
    fake: FakeDiscord,
) -> None:
    client = make_client(content=False)
    inbox = Inbox(client)
    async with running(client):
        plain = await fake.user_says(
            GENERAL, "just chatting", attachments=[("notes.txt", b"hi", "text/plain")]
        )
        in_dm = await fake.user_says(fake.dm_channel(ALICE), "a direct message")
        assert (await inbox.next(fake, plain)).content == ""
        assert (await inbox.next(fake, plain)).attachments == []
        seen_dm = await inbox.next(fake, in_dm)
    assert seen_dm.content == "a direct message"
    assert isinstance(seen_dm.channel, discord.DMChannel)


async def test_with_the_content_intent_every_message_arrives_whole(fake: FakeDiscord) -> None:
    client = make_client(content=True)
    inbox = Inbox(client)
    async with running(client):
        sent = await fake.user_says(RANDOM, "just chatting", user=BOB)
        seen = await inbox.next(fake, sent)
    assert seen.content == "just chatting"
    assert seen.author.id == BOB.id


# --- messages -------------------------------------------------------------------------------


async def test_the_bot_sends_edits_and_deletes_a_message(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        channel = text_channel(client, GENERAL)
        sent = await channel.send("working…")
        assert [m.content for m in fake.messages(GENERAL)] == ["working…"]
        await sent.edit(content="done")
        kept = fake.message(sent.id)
        assert kept.content == "done"
        assert len(kept.edited_at) == 1
        fetched = await channel.fetch_message(sent.id)
        assert fetched.content == "done"
        await sent.delete()
        assert fake.messages(GENERAL) == []
        assert fake.message(sent.id).deleted
        with pytest.raises(discord.NotFound) as missing:
            await channel.fetch_message(sent.id)
    assert missing.value.code == 10008


async def test_a_reply_refers_to_the_users_message(fake: FakeDiscord) -> None:
    client = make_client()
    inbox = Inbox(client)
    async with running(client):
        asked = await fake.user_says(GENERAL, "hello")
        seen = await inbox.next(fake, asked)
        answer = await seen.reply("hi Alice")
        history = [m.content async for m in seen.channel.history(limit=10)]
    assert history == ["hi Alice", "hello"]  # newest first
    assert fake.message(answer.id).reference_id == asked.id
    assert answer.reference is not None
    assert answer.reference.message_id == asked.id


async def test_a_message_over_2000_characters_is_refused_with_50035(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        with pytest.raises(discord.HTTPException) as refused:
            await text_channel(client, GENERAL).send("x" * 2001)
        await text_channel(client, GENERAL).send("x" * 2000)
    assert (refused.value.status, refused.value.code) == (400, 50035)
    assert "2000 or fewer" in refused.value.text
    assert [len(m.content) for m in fake.messages(GENERAL)] == [2000]


async def test_components_over_discords_limits_are_refused_with_50035(fake: FakeDiscord) -> None:
    def row(*ids: str) -> dict[str, object]:
        buttons = [{"type": 2, "style": 1, "label": i, "custom_id": i} for i in ids]
        return {"type": 1, "components": buttons}

    bodies = [
        {"content": "six rows", "components": [row(f"r{i}") for i in range(6)]},
        {"content": "six buttons", "components": [row(*(f"b{i}" for i in range(6)))]},
        {"content": "long id", "components": [row("x" * 101)]},
        {"content": "twice", "components": [row("same"), row("same")]},
    ]
    async with running(make_client()) as client:
        route = discord.http.Route("POST", "/channels/{channel_id}/messages", channel_id=GENERAL)
        for body in bodies:
            with pytest.raises(discord.HTTPException) as refused:
                await client.http.request(route, json=body)
            assert refused.value.code == 50035, body["content"]
        await client.http.request(route, json={"content": "fine", "components": [row("ok")]})
    assert [m.content for m in fake.messages(GENERAL)] == ["fine"]


async def test_a_file_is_uploaded_and_a_users_attachment_downloaded(fake: FakeDiscord) -> None:
    client = make_client()
    inbox = Inbox(client)
    async with running(client):
        channel = text_channel(client, GENERAL)
        sent = await channel.send("the diff", file=discord.File(io.BytesIO(b"+x\n"), "a.diff"))
        stored = fake.message(sent.id).attachments[0]
        assert (stored.filename, stored.data, stored.content_type) == (
            "a.diff",
            b"+x\n",
            "text/x-diff; charset=utf-8",
        )
        assert fake.called("POST", "/channels/*/messages")[0].files == [("a.diff", b"+x\n")]
        assert await sent.attachments[0].read() == b"+x\n"
        asked = await fake.user_says(
            GENERAL, "see the log", attachments=[("build.log", b"error: x", "text/plain")]
        )
        seen = await inbox.next(fake, asked)
        assert await seen.attachments[0].read() == b"error: x"
    assert fake.downloads[-1].endswith("/build.log")


async def test_an_attachment_link_without_its_signature_is_refused(fake: FakeDiscord) -> None:
    async with running(make_client()):
        sent = await fake.user_says(GENERAL, "log", attachments=[("a.log", b"x", "text/plain")])
    unsigned = sent.attachments[0].url.split("?")[0]
    async with aiohttp.ClientSession() as http, http.get(unsigned) as answer:
        assert answer.status == 404


async def test_a_file_over_the_upload_limit_is_refused_with_40005() -> None:
    async with FakeDiscord(upload_limit=1000) as fake, running(make_client()) as client:
        with pytest.raises(discord.HTTPException) as refused:
            await text_channel(client, GENERAL).send(
                file=discord.File(io.BytesIO(b"x" * 1001), "big.bin")
            )
        assert (refused.value.status, refused.value.code) == (413, 40005)
        assert fake.messages(GENERAL) == []


async def test_a_voice_message_arrives_as_one_with_its_audio(fake: FakeDiscord) -> None:
    client = make_client()
    inbox = Inbox(client)
    async with running(client):
        spoken = await fake.voice(fake.dm_channel(ALICE), b"OggS fake opus", duration=3.5)
        seen = await inbox.next(fake, spoken)
        clip = seen.attachments[0]
        assert seen.flags.voice
        assert clip.is_voice_message()
        assert (clip.content_type, clip.duration) == ("audio/ogg", 3.5)
        assert await clip.read() == b"OggS fake opus"


async def test_the_bot_reacts_types_and_opens_a_dm(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        channel = text_channel(client, GENERAL)
        sent = await channel.send("look")
        await sent.add_reaction("👀")
        await sent.add_reaction("✅")
        await sent.remove_reaction("👀", client.user)  # type: ignore[arg-type]
        assert fake.reactions[sent.id] == ["✅"]
        with pytest.raises(discord.HTTPException) as unknown:
            await sent.add_reaction("not-an-emoji")
        assert unknown.value.code == 10014
        async with channel.typing():
            pass
        assert [t.channel_id for t in fake.typing] == [GENERAL]
        alice = await client.fetch_user(ALICE.id)
        await alice.send("hello in private")
    dm = fake.dm_channel(ALICE)
    assert [m.content for m in fake.messages(dm)] == ["hello in private"]


async def test_fail_makes_the_next_matching_call_fail(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        channel = text_channel(client, GENERAL)
        fake.fail("POST", "/channels/*/messages")
        with pytest.raises(discord.Forbidden) as refused:
            await channel.send("not allowed")
        await channel.send("allowed again")
    assert refused.value.code == 50013
    assert [c.status for c in fake.called("POST", "/channels/*/messages")] == [403, 200]


# --- threads and forums ---------------------------------------------------------------------


async def test_the_bot_starts_a_thread_from_a_message_and_posts_in_it(fake: FakeDiscord) -> None:
    client = make_client()
    inbox = Inbox(client)
    async with running(client):
        asked = await fake.user_says(GENERAL, "start here", mentions_bot=True)
        seen = await inbox.next(fake, asked)
        thread = await seen.create_thread(name="pi: start here")
        assert thread.id == asked.id  # a thread from a message has the message's id
        await thread.send("on it")
        with pytest.raises(discord.HTTPException) as again:
            await seen.create_thread(name="twice")
        assert again.value.code == 160004
        await fake.wait_for(lambda: client.get_channel(thread.id))
    [kept] = fake.threads
    assert (kept.name, kept.parent_id, kept.owner_id) == ("pi: start here", GENERAL, BOT.id)
    assert [m.content for m in fake.messages(thread.id)] == ["on it"]


async def test_creating_a_thread_can_be_refused_for_missing_access(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        fake.fail("POST", "/channels/*/threads", 403, 50001, "Missing Access")
        with pytest.raises(discord.Forbidden) as refused:
            await text_channel(client, GENERAL).create_thread(
                name="x", type=discord.ChannelType.public_thread
            )
        thread = await text_channel(client, GENERAL).create_thread(
            name="x", type=discord.ChannelType.public_thread
        )
    assert refused.value.code == 50001
    assert [t.id for t in fake.threads] == [thread.id]


async def test_the_bot_opens_a_forum_post_and_a_user_opens_one(fake: FakeDiscord) -> None:
    client = make_client()
    inbox = Inbox(client)
    async with running(client):
        forum = client.get_channel(FORUM)
        assert isinstance(forum, discord.ForumChannel)
        tag = forum.get_tag(int(FORUM_TAGS[0]["id"]))
        assert tag is not None
        post = await forum.create_thread(name="A question", content="what?", applied_tags=[tag])
        assert post.thread.id == post.message.id
        assert fake.channels[post.thread.id].applied_tags == [FORUM_TAGS[0]["id"]]
        with pytest.raises(discord.HTTPException) as refused:
            await client.http.request(
                discord.http.Route("POST", "/channels/{channel_id}/messages", channel_id=FORUM),
                json={"content": "straight into the forum"},
            )
        assert refused.value.code == 40058
        opened = await fake.user_creates_thread(FORUM, "Help", "how do I…", user=BOB)
        first = fake.messages(opened.id)[0]
        assert first.id == opened.id
        seen = await inbox.next(fake, first)
        assert isinstance(seen.channel, discord.Thread)
        assert seen.channel.parent_id == FORUM


# --- interactions -------------------------------------------------------------------------


def one_button_view(on_press: discord.ui.Button[discord.ui.View]) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(on_press)
    return view


async def test_a_button_press_arrives_as_an_interaction_and_is_answered(fake: FakeDiscord) -> None:
    pressed: list[discord.Interaction] = []

    class Approve(discord.ui.Button[discord.ui.View]):
        async def callback(self, interaction: discord.Interaction) -> None:
            pressed.append(interaction)
            await interaction.response.send_message("approved", ephemeral=True)

    async with running(make_client()) as client:
        await text_channel(client, GENERAL).send(
            "allow `rm -rf build`?", view=one_button_view(Approve(label="Allow", custom_id="allow"))
        )
        [dialog] = fake.bot_messages(GENERAL)
        assert dialog.buttons == [("Allow", "allow")]
        with pytest.raises(LookupError):
            await fake.press(dialog, "deny")
        press = await fake.press(dialog, "allow", user=BOB)
        await fake.wait_for(lambda: press.answered)
    assert pressed[0].user.id == BOB.id
    assert (press.response_type, press.failed) == (4, False)
    answer = fake.message(press.original_id or 0)
    assert (answer.content, answer.ephemeral) == ("approved", True)
    assert answer.flags & EPHEMERAL


async def test_an_answer_after_three_seconds_is_refused_and_recorded_failed() -> None:
    clock = FakeClock(1000.0)
    release = asyncio.Event()
    errors: list[discord.HTTPException] = []

    class Slow(discord.ui.Button[discord.ui.View]):
        async def callback(self, interaction: discord.Interaction) -> None:
            await release.wait()
            try:
                await interaction.response.send_message("too late")
            except discord.HTTPException as exc:
                errors.append(exc)

    async with FakeDiscord(clock=clock) as fake, running(make_client()) as client:
        await text_channel(client, GENERAL).send(
            "slow", view=one_button_view(Slow(label="Go", custom_id="go"))
        )
        press = await fake.press(fake.bot_messages(GENERAL)[0], "go")
        clock.now += ANSWER_WITHIN + 0.5
        assert press.failed  # Discord already shows "This interaction failed"
        release.set()
        await fake.wait_for(lambda: errors)
    assert (errors[0].status, errors[0].code) == (404, 10062)
    assert press.late
    assert not press.answered
    assert fake.find("too late") is None


async def test_a_second_answer_is_refused_with_40060(fake: FakeDiscord) -> None:
    errors: list[discord.HTTPException] = []

    class Twice(discord.ui.Button[discord.ui.View]):
        async def callback(self, interaction: discord.Interaction) -> None:
            await interaction.response.defer()
            route = discord.http.Route(
                "POST",
                "/interactions/{webhook_id}/{webhook_token}/callback",
                webhook_id=interaction.id,
                webhook_token=interaction.token,
            )
            try:
                await interaction.client.http.request(route, json={"type": 6})
            except discord.HTTPException as exc:
                errors.append(exc)

    async with running(make_client()) as client:
        await text_channel(client, GENERAL).send(
            "x", view=one_button_view(Twice(label="Go", custom_id="go"))
        )
        press = await fake.press(fake.bot_messages(GENERAL)[0], "go")
        await fake.wait_for(lambda: errors)
    assert errors[0].code == 40060
    assert press.response_type == 6  # the deferred update stands


async def test_a_deferred_answer_is_filled_by_a_followup_and_edited(fake: FakeDiscord) -> None:
    done = asyncio.Event()

    class Work(discord.ui.Button[discord.ui.View]):
        async def callback(self, interaction: discord.Interaction) -> None:
            await interaction.response.defer(thinking=True)
            await interaction.followup.send("first result")
            await interaction.followup.send("second result")
            await interaction.edit_original_response(content="first result, edited")
            done.set()

    async with running(make_client()) as client:
        await text_channel(client, GENERAL).send(
            "work?", view=one_button_view(Work(label="Work", custom_id="work"))
        )
        press = await fake.press(fake.bot_messages(GENERAL)[0], "work")
        await asyncio.wait_for(done.wait(), WAIT)
    original = fake.message(press.original_id or 0)
    assert press.response_type == 5
    assert original.content == "first result, edited"
    assert not original.flags & LOADING
    assert [fake.message(i).content for i in press.followup_ids] == [
        "first result, edited",
        "second result",
    ]


async def test_an_update_answer_edits_the_pressed_message(fake: FakeDiscord) -> None:
    class Done(discord.ui.Button[discord.ui.View]):
        async def callback(self, interaction: discord.Interaction) -> None:
            await interaction.response.edit_message(content="allowed ✓", view=None)

    async with running(make_client()) as client:
        await text_channel(client, GENERAL).send(
            "allow?", view=one_button_view(Done(label="Allow", custom_id="allow"))
        )
        [dialog] = fake.bot_messages(GENERAL)
        press = await fake.press(dialog, "allow")
        await fake.wait_for(lambda: press.answered)
    assert press.response_type == 7
    assert (dialog.content, dialog.buttons) == ("allowed ✓", [])


async def test_a_modal_is_shown_and_submitted(fake: FakeDiscord) -> None:
    submitted: list[str] = []

    class Reason(discord.ui.Modal, title="Why deny?"):
        why: discord.ui.TextInput[Reason] = discord.ui.TextInput(
            label="Reason", custom_id="why", max_length=50
        )

        async def on_submit(self, interaction: discord.Interaction) -> None:
            submitted.append(self.why.value)
            await interaction.response.send_message(f"denied: {self.why.value}")

    class Deny(discord.ui.Button[discord.ui.View]):
        async def callback(self, interaction: discord.Interaction) -> None:
            await interaction.response.send_modal(Reason(custom_id="reason"))

    async with running(make_client()) as client:
        await text_channel(client, GENERAL).send(
            "allow?", view=one_button_view(Deny(label="Deny", custom_id="deny"))
        )
        press = await fake.press(fake.bot_messages(GENERAL)[0], "deny")
        [modal] = await fake.wait_for(lambda: fake.modals)
        assert (modal.title, [f.custom_id for f in modal.fields]) == ("Why deny?", ["why"])
        assert press.response_type == 9
        with pytest.raises(ValueError, match="why"):
            await fake.submit_modal(press, {"why": "x" * 51})
        with pytest.raises(LookupError):
            await fake.submit_modal(press, {"why": "not mine"}, user=BOB)
        submit = await fake.submit_modal(press, {"why": "too risky"})
        await fake.wait_for(lambda: submit.answered)
    assert submitted == ["too risky"]
    assert fake.find("denied: too risky") is not None


async def test_slash_commands_are_synced_and_used(fake: FakeDiscord) -> None:
    client = make_client()
    tree = app_commands.CommandTree(client)
    asked: list[str] = []

    @tree.command(name="pi", description="Ask the agent")
    async def pi(interaction: discord.Interaction, question: str) -> None:
        asked.append(question)
        await interaction.response.send_message(f"thinking about {question}")

    @tree.command(name="stop", description="Stop the agent", guild=discord.Object(GUILD_ID))
    async def stop(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("stopped", ephemeral=True)

    async with running(client):
        synced = await tree.sync()
        await tree.sync(guild=discord.Object(GUILD_ID))
        assert [c.name for c in synced] == ["pi"]
        assert [c["name"] for c in fake.commands[None]] == ["pi"]
        assert [c["name"] for c in fake.commands[GUILD_ID]] == ["stop"]
        with pytest.raises(LookupError):
            await fake.slash(GENERAL, "unknown")
        used = await fake.slash(GENERAL, "pi", {"question": "why?"})
        stopped = await fake.slash(GENERAL, "stop")
        await fake.wait_for(lambda: used.answered and stopped.answered)
    assert asked == ["why?"]
    assert fake.message(used.original_id or 0).content == "thinking about why?"
    assert fake.message(stopped.original_id or 0).ephemeral


# --- rate limits -------------------------------------------------------------------------------


async def test_a_429_is_honoured_by_discord_py_and_nothing_is_lost(fake: FakeDiscord) -> None:
    async with running(make_client()) as client:
        fake.fail("POST", "/channels/*/messages", 429, retry_after=0.3)
        started = time.monotonic()
        await text_channel(client, GENERAL).send("after the wait")
        waited = time.monotonic() - started
    assert waited >= 0.3
    assert [c.status for c in fake.called("POST", "/channels/*/messages")] == [429, 200]
    assert [m.content for m in fake.messages(GENERAL)] == ["after the wait"]
    assert len(fake.limited) == 1


async def test_with_limits_discord_py_paces_itself_from_the_headers() -> None:
    window = 0.5  # the 5-per-5-s message bucket, scaled
    async with FakeDiscord(enforce_limits=True, window_scale=window / 5) as fake:
        async with running(make_client()) as client:
            channel = text_channel(client, GENERAL)
            started = time.monotonic()
            for n in range(7):
                await channel.send(f"message {n}")
            took = time.monotonic() - started
        assert took >= window * 0.9  # the sixth waited for the bucket to reset
        assert fake.limited == []
        assert len(fake.messages(GENERAL)) == 7


async def test_with_limits_a_client_that_ignores_them_gets_discords_429() -> None:
    frozen = FakeClock(1000.0)  # every call inside the bucket's window, however slow the host
    async with (
        FakeDiscord(enforce_limits=True, clock=frozen) as fake,
        aiohttp.ClientSession() as http,
    ):
        url = f"{fake.api_url}/channels/{GENERAL}/messages"
        headers = {"Authorization": f"Bot {TOKEN}"}
        answers = []
        for n in range(6):
            async with http.post(url, json={"content": f"m{n}"}, headers=headers) as answer:
                answers.append((answer.status, dict(answer.headers), await answer.json()))
    first_status, first_headers, _ = answers[0]
    assert (first_status, first_headers["X-RateLimit-Limit"]) == (200, "5")
    assert first_headers["X-RateLimit-Remaining"] == "4"
    status, headers, body = answers[5]
    assert status == 429
    assert body["message"] == "You are being rate limited."
    assert body["global"] is False
    assert 0 < body["retry_after"] <= 5
    assert headers["X-RateLimit-Scope"] == "user"
    assert headers["Retry-After"].isdigit()
    assert headers["Via"]
    assert len(fake.messages(GENERAL)) == 5


async def test_with_limits_the_global_limit_answers_a_global_429() -> None:
    frozen = FakeClock(1000.0)  # every call inside the same second
    async with (
        FakeDiscord(enforce_limits=True, clock=frozen) as fake,
        aiohttp.ClientSession() as http,
    ):
        headers = {"Authorization": f"Bot {TOKEN}"}
        statuses, last = [], None
        for _ in range(60):
            async with http.get(f"{fake.api_url}/users/@me", headers=headers) as answer:
                statuses.append(answer.status)
                if answer.status == 429:
                    last = (dict(answer.headers), await answer.json())
                    break
    assert statuses.count(200) == 50
    assert last is not None
    assert last[1]["global"] is True
    assert last[0]["X-RateLimit-Global"] == "true"
    assert last[0]["X-RateLimit-Scope"] == "global"

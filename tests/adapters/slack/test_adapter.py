"""The Slack adapter with the real slack_sdk and bolt against the fake Slack:
Web API calls, error mapping, and Socket Mode delivery (acked, once per event)."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import aiohttp
import anyio
import pytest
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter, token_may_go_to
from adapters.slack.convert import Identity
from adapters.slack.groups import UserGroups
from adapters.slack.runner import PREFIXES, run_slack, slack_intake
from adapters.slack.settings import SlackSettings
from bridge.model import MAX_ATTACHMENT, AttachmentRefused, Button, ChatRef, Form, MessageRef
from bridge.options import AgentOptions, BridgeOptions
from bridge.platform import (
    BadFormatting,
    MessageGone,
    PlatformError,
    RateLimited,
    TooLong,
    TransientError,
)
from bridge.service import Bridge
from bridge.store import ConversationRecord, open_store
from tests.support.fake_slack import (
    ALICE,
    BOT_ID,
    BOT_USER,
    CHANNEL,
    TEAM,
    FakeSlack,
    signature,
)
from tests.support.flaky_store import open_flaky
from tests.support.loopback import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.model import Inbound

pytestmark = pytest.mark.anyio

THREAD = ChatRef(CHANNEL, "1700000000.000001")
EVE = "U0EVE"  # not an allowed user


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
def adapter(slack: FakeSlack) -> SlackAdapter:
    return SlackAdapter(AsyncWebClient(token=slack.bot_token, base_url=slack.base_url))


async def test_a_message_is_posted_in_the_thread_without_unfurling(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    ref = await adapter.send(THREAD, "**hello**", markup="formatted")
    call = slack.called("chat.postMessage")[0]
    assert call.args["thread_ts"] == THREAD.thread_id
    assert call.args["unfurl_links"] is False
    assert call.args["unfurl_media"] is False
    assert slack.messages[ref.message_id].blocks == [{"type": "markdown", "text": "**hello**"}]
    assert ref.chat == THREAD


async def test_buttons_arrive_as_block_kit_actions(slack: FakeSlack, adapter: SlackAdapter) -> None:
    keyboard = ((Button("Yes", "tok-yes"), Button("No", "tok-no")),)
    ref = await adapter.send(THREAD, "Allow?", buttons=keyboard)
    actions = [b for b in slack.messages[ref.message_id].blocks if b["type"] == "actions"]
    assert [e["value"] for e in actions[0]["elements"]] == ["tok-yes", "tok-no"]


async def test_an_edit_replaces_text_and_removes_buttons(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    ref = await adapter.send(THREAD, "Allow?", buttons=((Button("Yes", "t"),),))
    await adapter.edit(ref, "Allowed by alice")
    posted = slack.messages[ref.message_id]
    assert posted.text == "Allowed by alice"
    assert [b["type"] for b in posted.blocks] == ["section"]


async def test_editing_or_deleting_a_vanished_message_says_it_is_gone(
    adapter: SlackAdapter,
) -> None:
    ghost = MessageRef(THREAD, "1.000000")
    with pytest.raises(MessageGone):
        await adapter.edit(ghost, "x")
    with pytest.raises(MessageGone):
        await adapter.delete(ghost)


async def test_a_deleted_message_is_gone(slack: FakeSlack, adapter: SlackAdapter) -> None:
    ref = await adapter.send(THREAD, "working…")
    await adapter.delete(ref)
    assert slack.messages[ref.message_id].deleted


async def test_a_press_is_answered_privately_to_the_presser(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    await adapter.answer_press(f"{CHANNEL}|{ALICE}|{THREAD.thread_id}", "not allowed", alert=True)
    call = slack.called("chat.postEphemeral")[0]
    assert (call.args["channel"], call.args["user"]) == (CHANNEL, ALICE)
    assert call.args["thread_ts"] == THREAD.thread_id
    await adapter.answer_press(f"{CHANNEL}|{ALICE}|", "")
    assert len(slack.called("chat.postEphemeral")) == 1


async def test_a_users_message_shows_eyes_while_working_then_how_the_run_ended(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    await adapter.react(THREAD, "171.1", "working")
    assert slack.reactions["171.1"] == ["eyes"]
    await adapter.react(THREAD, "171.1", "working")  # already_reacted is fine
    await adapter.react(THREAD, "171.1", "done")
    assert slack.reactions["171.1"] == ["white_check_mark"]
    await adapter.react(THREAD, "171.2", "failed")  # no eyes to remove: no_reaction is fine
    assert slack.reactions["171.2"] == ["x"]
    assert slack.called("reactions.add")[0].args["channel"] == CHANNEL
    slack.fail("reactions.add", "missing_scope")
    with pytest.raises(PlatformError):
        await adapter.react(THREAD, "171.3", "working")


async def test_an_upload_lands_in_the_thread_and_can_be_deleted(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    ref = await adapter.upload(THREAD, "output.txt", b"lots of output", caption="bash output")
    file_id = ref.message_id.removeprefix("file:")
    assert slack.uploads[file_id] == b"lots of output"
    done = slack.called("files.completeUploadExternal")[0]
    assert done.args["channel_id"] == CHANNEL
    assert done.args["thread_ts"] == THREAD.thread_id
    await adapter.delete(ref)
    assert file_id not in slack.uploads


async def test_a_429_becomes_rate_limited_with_slacks_retry_after(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    slack.fail("chat.postMessage", "ratelimited", status=429, retry_after=7)
    with pytest.raises(RateLimited) as caught:
        await adapter.send(THREAD, "hi")
    assert caught.value.retry_after == 7.0


@pytest.mark.parametrize(
    ("error", "status", "markup", "expected"),
    [
        ("invalid_blocks", 200, "formatted", BadFormatting),
        ("invalid_blocks", 200, "plain", TooLong),
        ("msg_too_long", 200, "plain", TooLong),
        ("internal_error", 500, "plain", TransientError),
        ("channel_not_found", 200, "plain", PlatformError),
    ],
)
async def test_slack_errors_become_platform_errors(
    slack: FakeSlack,
    adapter: SlackAdapter,
    error: str,
    status: int,
    markup: str,
    expected: type[PlatformError],
) -> None:
    slack.fail("chat.postMessage", error, status=status)
    with pytest.raises(expected):
        await adapter.send(THREAD, "hi", markup=markup)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "expected"), [(502, TransientError), (405, PlatformError)], ids=["502", "405"]
)
async def test_an_html_answer_from_in_front_of_slack_is_still_a_platform_error(
    slack: FakeSlack, adapter: SlackAdapter, status: int, expected: type[PlatformError]
) -> None:
    slack.fail("chat.postMessage", "Bad Gateway", status=status, html=True)
    with pytest.raises(expected):
        await adapter.send(THREAD, "hi")


async def test_blocks_over_slacks_limits_are_refused_as_slack_does(
    adapter: SlackAdapter,
) -> None:
    with pytest.raises(BadFormatting):
        await adapter.send(THREAD, "x" * 13_000, markup="formatted")


async def test_an_unreachable_slack_is_a_transient_error() -> None:
    async with FakeSlack() as gone:
        base_url = gone.base_url
    adapter = SlackAdapter(AsyncWebClient(token="xoxb-fake", base_url=base_url))
    with pytest.raises(TransientError):
        await adapter.send(THREAD, "hi")


async def test_identity_and_private_image_downloads(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    assert await adapter.identity() == Identity(TEAM, BOT_USER, BOT_ID)
    url = slack.add_file(b"\x89PNG...", "image/png")
    assert await adapter.download(url) == b"\x89PNG..."
    stranger = SlackAdapter(AsyncWebClient(token="xoxb-wrong", base_url=slack.base_url))
    with pytest.raises(AttachmentRefused, match="Slack would not hand it over"):
        await stranger.download(url)
    with pytest.raises(AttachmentRefused, match="the limit is"):
        await adapter.download(url, cap=4)  # refused by its Content-Length


async def test_an_image_larger_than_one_read_arrives_whole(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    # Several MB reach the client in many chunks: all of them make the image.
    photo = b"\x89PNG" + bytes(range(256)) * (3 * 2**20 // 256)
    url = slack.add_file(photo, "image/png")
    assert await adapter.download(url) == photo
    with pytest.raises(AttachmentRefused, match=r"it is 3\.0 MB, the limit is 1\.0 MB"):
        await adapter.download(url, cap=2**20)


async def test_a_body_that_outgrows_the_cap_unannounced_is_not_read_to_its_end(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    url = slack.add_stream(256 * 2**20, "image/png")  # chunked: no Content-Length
    with pytest.raises(AttachmentRefused, match=r"over the limit of 1\.0 MB"):
        await adapter.download(url, cap=2**20)
    name = url.rsplit("/", 1)[1]
    await slack.wait_until(lambda: name in slack.streams_ended)
    assert slack.streamed[name] < 64 * 2**20  # given up at the cap (and socket buffers)


async def test_the_bot_token_goes_only_to_slacks_file_hosts(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    # A remote file's url_private may name any host: it gets no request, so no token.
    seen: list[str | None] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=b"\x89PNG", content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", record)
    other = web.AppRunner(app)
    await other.setup()
    port = free_port()
    await web.TCPSite(other, "127.0.0.1", port).start()
    try:
        with pytest.raises(AttachmentRefused, match="not on Slack's file servers"):
            await adapter.download(f"http://127.0.0.1:{port}/evil.png")
        assert seen == []
        # Slack's own host sending the request elsewhere: followed, without the token.
        await adapter.download(slack.add_redirect(f"http://127.0.0.1:{port}/moved.png"))
    finally:
        await other.cleanup()
    assert seen == [None]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://files.slack.com/files-pri/T1-F1/a.png", True),
        ("http://files.slack.com/files-pri/T1-F1/a.png", False),
        ("https://files.slack.com:8443/a.png", False),
        ("https://files.slack.com.evil.example/a.png", False),
        ("https://evil.example/files.slack.com/a.png", False),
        ("https://slack.com/api/../files/a.png", True),  # the API's own origin
        ("https://user@slack.com.evil.example/a.png", False),
        ("not a url", False),
    ],
)
def test_which_urls_may_receive_the_bot_token(url: str, allowed: bool) -> None:
    assert token_may_go_to(url, "https://slack.com/api/") is allowed


# --- Socket Mode ----------------------------------------------------------------------


class Recorder:
    """Stands in for the bridge: records what it is handed."""

    def __init__(self) -> None:
        self.inbounds: list[Inbound] = []
        self.undecodable_events = 0

    async def handle(self, inbound: Inbound) -> None:
        self.inbounds.append(inbound)

    def undecodable(self) -> None:
        self.undecodable_events += 1

    async def count(self, n: int) -> None:
        with anyio.fail_after(10):
            while len(self.inbounds) < n:  # noqa: ASYNC110 (polls the recorder)
                await anyio.sleep(0.01)


@pytest.fixture
def settings(slack: FakeSlack) -> SlackSettings:
    return socket_settings(slack)


def socket_settings(slack: FakeSlack, **changes: Any) -> SlackSettings:
    """Socket Mode against the fake, with `changes`."""
    return SlackSettings(
        bot_token=slack.bot_token,
        app_token=slack.app_token,
        api_base_url=slack.base_url,
        **changes,
    )


@contextlib.asynccontextmanager
async def agentless_bridge(slack: FakeSlack, tmp_path: Path) -> AsyncIterator[None]:
    """`run_slack` for ALICE alone, with an agent that cannot start: a test that
    makes the bridge start one fails."""
    settings = socket_settings(slack, allowed_users=frozenset({ALICE}))
    agent = AgentOptions(argv=("/nonexistent/pi",), env={})
    options = BridgeOptions(tmp_path, agent, allowed_users=settings.allowed_users)
    store = await open_store("sqlite", tmp_path)

    @contextlib.asynccontextmanager
    async def bridge_for(adapter: SlackAdapter) -> AsyncIterator[Bridge]:
        async with Bridge(adapter, store, options, prefixes=PREFIXES) as bridge:
            yield bridge

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_slack, settings, bridge_for, store)
            yield
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


async def test_socket_mode_delivers_a_mention_once_despite_redelivery(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        first = await slack.mention("fix the build")
        await bridge.count(1)
        again = await slack.redeliver(first)
        await slack.acked(first)
        await slack.acked(again)
        await slack.mention("a second one")
        await bridge.count(2)
    texts = [i.text for i in bridge.inbounds]
    assert texts == ["fix the build", "a second one"]
    ts = first["payload"]["event"]["ts"]
    assert bridge.inbounds[0].key == f"slack:{TEAM}:{CHANNEL}:{ts}"
    assert bridge.inbounds[0].chat == ChatRef(CHANNEL, ts)


async def test_replies_in_a_started_thread_follow_and_others_do_not(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        root = (await slack.mention("start"))["payload"]["event"]["ts"]
        await bridge.count(1)
        await slack.thread_message("someone else's thread", "1600000000.000001")
        await slack.thread_message("!stop", root)
        await bridge.count(2)
    assert [i.text for i in bridge.inbounds] == ["start", "!stop"]
    assert bridge.inbounds[1].key == bridge.inbounds[0].key


async def test_a_thread_the_store_knows_is_followed_after_a_restart(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    known = f"slack:{TEAM}:{CHANNEL}:1600000000.000009"

    async def owns(key: str) -> bool:
        return key == known

    async with slack_intake(settings, bridge, adapter, owns):
        await slack.thread_message("still there?", "1600000000.000009")
        await bridge.count(1)
    assert bridge.inbounds[0].key == known


async def test_a_thread_the_store_knows_is_followed_when_the_store_fails_at_first(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings, tmp_path: Path
) -> None:
    known = f"slack:{TEAM}:{CHANNEL}:1600000000.000009"
    store = await open_flaky(tmp_path, lookup_failures=2)  # a locked database, twice
    record = ConversationRecord(
        key=known, workspace="w", session_dir="s", created_at=0.0, last_active=0.0
    )
    await store.put_conversation(record)
    bridge = Recorder()

    async def owns(key: str) -> bool:
        return await store.get_conversation(key) is not None

    try:
        async with slack_intake(settings, bridge, adapter, owns):
            await slack.thread_message("still there?", "1600000000.000009")
            await bridge.count(1)
    finally:
        await store.aclose()
    assert bridge.inbounds[0].key == known


async def test_a_button_press_is_acked_and_delivered_with_its_token(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    ref = await adapter.send(THREAD, "Allow?", buttons=((Button("Yes", "tok-yes"),),))
    async with slack_intake(settings, bridge, adapter):
        envelope = await slack.press(ref.message_id, "pi_bridge:0.0")
        await slack.acked(envelope)
        await bridge.count(1)
    press = bridge.inbounds[0].press
    assert press is not None
    assert press.token == "tok-yes"
    assert press.message == ref
    await adapter.answer_press(press.press_id, "done")
    assert slack.called("chat.postEphemeral")[0].args["user"] == ALICE


async def test_a_press_on_a_form_button_opens_a_modal_whose_submission_carries_the_text(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    form = Form("Branch name?", prefill="main")
    buttons = ((Button("Answer", "tok-ans", form), Button("Cancel", "tok-no")),)
    ref = await adapter.send(THREAD, "Branch?", buttons=buttons)
    async with slack_intake(settings, bridge, adapter):
        await slack.acked(await slack.press(ref.message_id, "pi_bridge:0.0"))
        await slack.wait_until(lambda: bool(slack.views))
        assert bridge.inbounds == [], "the press waits for the submission"
        await slack.acked(await slack.submit_view(values={"answer": "feature/x"}))
        await bridge.count(1)
        await slack.press(ref.message_id, "pi_bridge:0.1")
        await bridge.count(2)
    [view] = slack.views.values()
    assert view["blocks"][-1]["element"]["initial_value"] == "main"
    answered, cancelled = bridge.inbounds
    assert answered.press is not None
    assert (answered.press.token, answered.press.text) == ("tok-ans", "feature/x")
    assert answered.press.message == ref
    assert answered.key == f"slack:{TEAM}:{THREAD.chat_id}:{THREAD.thread_id}"
    assert cancelled.press is not None
    assert (cancelled.press.token, cancelled.press.text) == ("tok-no", None)


async def test_a_form_slack_will_not_open_falls_back_to_a_plain_press(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    ref = await adapter.send(THREAD, "Branch?", buttons=((Button("A", "tok", Form("B?")),),))
    slack.fail("views.open", "expired_trigger_id")
    async with slack_intake(settings, bridge, adapter):
        await slack.press(ref.message_id, "pi_bridge:0.0")
        await bridge.count(1)
    assert bridge.inbounds[0].press is not None
    assert bridge.inbounds[0].press.text is None
    assert not slack.views


async def test_a_photo_in_a_dm_arrives_as_an_image(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    url = slack.add_file(b"\x89PNG...", "image/png")
    files = [{"id": "F9", "mimetype": "image/png", "url_private": url, "size": 11}]
    async with slack_intake(settings, bridge, adapter):
        await slack.deliver_event(
            {
                "type": "message",
                "subtype": "file_share",
                "channel_type": "im",
                "channel": "D0DM",
                "user": ALICE,
                "text": "what is this?",
                "ts": slack.new_ts(),
                "files": files,
            }
        )
        await bridge.count(1)
    [photo] = bridge.inbounds[0].attachments  # handed over unfetched
    assert (photo.mime_type, photo.size) == ("image/png", 11)
    assert await photo.fetch(MAX_ATTACHMENT) == b"\x89PNG..."
    assert bridge.inbounds[0].key == f"slack:{TEAM}:D0DM"


async def test_the_bots_own_messages_never_reach_the_bridge_as_prompts(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        root = (await slack.mention("start"))["payload"]["event"]["ts"]
        await bridge.count(1)
        own = {
            "type": "message",
            "channel_type": "channel",
            "channel": CHANNEL,
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "text": "working…",
            "ts": slack.new_ts(),
            "thread_ts": root,
        }
        envelope = await slack.deliver_event(own)
        await slack.acked(envelope)
        await slack.thread_message("next", root)
        await bridge.count(2)
    assert all(not i.from_self for i in bridge.inbounds)
    assert [i.text for i in bridge.inbounds] == ["start", "next"]


# --- HTTP mode and settings -----------------------------------------------------------


def signed(secret: str, body: bytes, retry: int | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **signature(secret, body)}
    if retry is not None:
        headers["X-Slack-Retry-Num"] = str(retry)
    return headers


async def test_http_mode_verifies_signatures_and_drops_retries(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    secret = "signing-secret"
    port = free_port()
    settings = SlackSettings(
        bot_token=slack.bot_token,
        signing_secret=secret,
        api_base_url=slack.base_url,
        http_port=port,
        http_host="127.0.0.1",
    )
    event = {"type": "app_mention", "user": ALICE, "text": f"<@{BOT_USER}> hi", "ts": "5.1"}
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": TEAM,
            "api_app_id": "A0APP",
            "event_id": "EvHTTP1",
            "event": {**event, "channel": CHANNEL},
        }
    ).encode()
    url = f"http://127.0.0.1:{port}/slack/events"
    bridge = Recorder()
    async with (
        slack_intake(settings, bridge, adapter),
        aiohttp.ClientSession() as http,
    ):
        async with http.post(url, data=body, headers=signed("wrong", body)) as forged:
            assert forged.status == 401
        async with http.post(url, data=body, headers=signed(secret, body)) as first:
            assert first.status == 200
        async with http.post(url, data=body, headers=signed(secret, body, retry=1)) as retry:
            assert retry.status == 200
        await bridge.count(1)
        await anyio.sleep(0.2)
    assert [i.text for i in bridge.inbounds] == ["hi"]


async def test_run_slack_refuses_a_stranger_politely_without_agent_work(
    slack: FakeSlack, tmp_path: Path
) -> None:
    async with agentless_bridge(slack, tmp_path):
        await slack.dm("let me in", user="U0EVE")
        refusal = await slack.wait_for("chat.postMessage")
    assert "not allowed" in refusal.args["text"]
    assert refusal.args["channel"] == "D0DM"


async def test_a_stranger_in_a_channel_is_refused_once_and_only_they_see_it(
    slack: FakeSlack, tmp_path: Path
) -> None:
    async with agentless_bridge(slack, tmp_path):
        first = (await slack.mention("let me in", user=EVE))["payload"]["event"]
        note = await slack.wait_for("chat.postEphemeral")
        await slack.mention("please", user=EVE, thread_ts=first["ts"])
        await slack.wait_until(lambda: len(slack.acks) == 2)
        await anyio.sleep(0.3)  # room for a second note, which must not come
    assert "not allowed" in note.args["text"]
    assert (note.args["user"], note.args["channel"]) == (EVE, CHANNEL)
    assert note.args["thread_ts"] == first["ts"]
    assert len(slack.called("chat.postEphemeral")) == 1
    assert not slack.called("chat.postMessage"), "the refusal was public"


async def test_members_of_a_configured_user_group_carry_it(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    slack.usergroups = {"S0DEVS": [ALICE, "U0BOB"], "S0LEADS": ["U0BOB"]}
    settings = socket_settings(slack, allowed_users=frozenset({"S0DEVS"}))
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter, user_groups=["S0LEADS"]):
        await slack.dm("hi", user=ALICE)
        await slack.dm("hello", user="U0BOB")
        await slack.dm("hey", user=EVE)
        await bridge.count(3)
    groups = {i.sender.id: i.sender.groups for i in bridge.inbounds}
    assert groups == {
        ALICE: frozenset({"S0DEVS"}),
        "U0BOB": frozenset({"S0DEVS", "S0LEADS"}),
        EVE: frozenset(),
    }
    asked = sorted(c.args["usergroup"] for c in slack.called("usergroups.users.list"))
    assert asked == ["S0DEVS", "S0LEADS"], "members are cached, not asked per message"


async def test_when_slack_cannot_list_a_group_nobody_is_admitted_by_it(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    settings = socket_settings(slack, allowed_users=frozenset({"S0GONE"}))
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        await slack.dm("hi", user=ALICE)
        await bridge.count(1)
    assert bridge.inbounds[0].sender.groups == frozenset()


async def test_outside_the_allowed_channels_a_mention_is_told_once_privately(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    settings = socket_settings(slack, allowed_channels=frozenset({CHANNEL}))
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        await slack.mention("here?", channel="C0OTHER")
        note = await slack.wait_for("chat.postEphemeral")
        await slack.mention("still?", channel="C0OTHER")
        await slack.mention("and here", channel=CHANNEL)
        await slack.dm("and privately")
        await bridge.count(2)
        await anyio.sleep(0.2)
    assert [i.text for i in bridge.inbounds] == ["and here", "and privately"]
    assert (note.args["channel"], note.args["user"]) == ("C0OTHER", ALICE)
    assert "not enabled in this channel" in note.args["text"]
    assert len(slack.called("chat.postEphemeral")) == 1


async def test_group_members_are_asked_again_after_the_ttl_and_kept_when_slack_fails(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    now = [0.0]
    slack.usergroups = {"S0DEVS": [ALICE]}
    groups = UserGroups(adapter, ["S0DEVS"], ttl=300, clock=lambda: now[0])
    assert await groups.of(ALICE) == {"S0DEVS"}
    slack.usergroups = {"S0DEVS": ["U0BOB"]}
    now[0] = 299
    assert await groups.of(ALICE) == {"S0DEVS"}, "asked Slack before the ttl ran out"
    now[0] = 301
    assert await groups.of(ALICE) == frozenset()
    assert await groups.of("U0BOB") == {"S0DEVS"}
    slack.fail("usergroups.users.list", "internal_error", status=500)
    now[0] = 700
    assert await groups.of("U0BOB") == {"S0DEVS"}, "a failing Slack dropped the last known"
    assert len(slack.called("usergroups.users.list")) == 3


async def test_slash_pi_posts_the_task_as_a_thread_root_and_the_thread_follows(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        usage = await slack.slash("")
        await slack.acked(usage)
        envelope = await slack.slash("fix the build")
        await bridge.count(1)
        [root] = [m for m in slack.messages.values() if m.thread_ts is None]
        await slack.thread_message("and the tests", root.ts)
        await bridge.count(2)
        await slack.redeliver(envelope)
        await anyio.sleep(0.2)
    assert "/pi <task>" in slack.acked_with[usage["envelope_id"]]["text"]
    assert root.channel == CHANNEL
    assert root.text == f"<@{ALICE}> asked:\n> fix the build"
    first, second = bridge.inbounds
    assert first.key == second.key == f"slack:{TEAM}:{CHANNEL}:{root.ts}"
    assert (first.text, second.text) == ("fix the build", "and the tests")
    assert len(slack.called("chat.postMessage")) == 1, "a redelivered command started twice"


async def test_slash_pi_from_a_stranger_posts_nothing_public(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    settings = socket_settings(slack, allowed_users=frozenset({ALICE}))
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        await slack.slash("let me in", user=EVE)
        note = await slack.wait_for("chat.postEphemeral")
    assert note.args["user"] == EVE
    assert "not allowed" in note.args["text"]
    assert not slack.called("chat.postMessage")
    assert not bridge.inbounds


async def test_slash_pi_where_the_bot_is_not_a_member_says_to_invite_it(
    slack: FakeSlack, adapter: SlackAdapter, settings: SlackSettings
) -> None:
    slack.fail("chat.postMessage", "not_in_channel")
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter):
        await slack.slash("fix the build", channel="C0ELSEWHERE")
        note = await slack.wait_for("chat.postEphemeral")
    assert "/invite me" in note.args["text"]
    assert (note.args["channel"], note.args["user"]) == ("C0ELSEWHERE", ALICE)
    assert not bridge.inbounds


async def test_the_fake_holds_chat_update_to_the_workspaces_tier_3_budget(
    slack: FakeSlack,
) -> None:
    # What the bench's "0 429s" stands on: edits of many messages at once are refused
    # beyond Slack's per-workspace budget, not only those of one message.
    slack.enforce_limits = True
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
    posted = [await client.chat_postMessage(channel=f"C{n}", text="…") for n in range(25)]
    statuses = []
    for message in posted:
        try:
            await client.chat_update(channel=message["channel"], ts=message["ts"], text="v1")
            statuses.append(200)
        except SlackApiError as exc:
            statuses.append(exc.response.status_code)
    assert statuses == [200] * 20 + [429] * 5

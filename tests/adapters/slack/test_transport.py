"""What cannot be read arrives over Socket Mode or HTTP and is acknowledged, counted and
skipped (adapters/slack/transport.py, adapters/malformed.py), with the real bolt against
the fake Slack; what comes after it is delivered."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from adapters.slack.runner import slack_intake
from adapters.slack.settings import SlackSettings
from tests.adapters.slack.test_adapter import Recorder, signed, socket_settings
from tests.support.fake_slack import ALICE, BOT_USER, CHANNEL, DM_CHANNEL, TEAM, FakeSlack
from tests.support.loopback import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from tests.support.fake_slack import Json

pytestmark = pytest.mark.anyio

SECRET = "signing-secret"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
def adapter(slack: FakeSlack) -> SlackAdapter:
    return SlackAdapter(AsyncWebClient(token=slack.bot_token, base_url=slack.base_url))


def unreadable(slack: FakeSlack) -> list[Json]:
    """Payloads nothing can read: bolt's middleware fails (an event that is no object),
    our converter fails (a text that is no string)."""
    text = {"type": "message", "channel_type": "im", "user": ALICE, "text": {"no": "string"}}
    return [
        {**slack.event_callback({"type": "message"}), "event": "not an object"},
        slack.event_callback({**text, "ts": slack.new_ts(), "channel": DM_CHANNEL}),
    ]


async def test_socket_mode_acks_and_counts_what_cannot_be_read_then_goes_on(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    bridge = Recorder()
    async with slack_intake(socket_settings(slack), bridge, adapter):
        bad = [await slack.send_envelope("events_api", payload) for payload in unreadable(slack)]
        for envelope in bad:
            await slack.acked(envelope)
        await slack.mention("after them")
        await bridge.count(1)
    assert [i.text for i in bridge.inbounds] == ["after them"]
    assert bridge.undecodable_events == 2


async def test_http_mode_answers_200_to_a_signed_unreadable_request_and_401_to_a_forged_one(
    slack: FakeSlack, adapter: SlackAdapter
) -> None:
    port = free_port()
    settings = SlackSettings(
        bot_token=slack.bot_token,
        signing_secret=SECRET,
        api_base_url=slack.base_url,
        http_port=port,
        http_host="127.0.0.1",
    )
    url = f"http://127.0.0.1:{port}/slack/events"
    mention = {"type": "app_mention", "user": ALICE, "text": f"<@{BOT_USER}> hi", "ts": "5.1"}
    good = {**slack.event_callback({**mention, "channel": CHANNEL}), "team_id": TEAM}
    bridge = Recorder()
    async with slack_intake(settings, bridge, adapter), aiohttp.ClientSession() as http:
        # And one bolt cannot even make a request of: JSON that is no object.
        for payload in [*unreadable(slack), ["not", "an", "object"]]:
            body = json.dumps(payload).encode()
            async with http.post(url, data=body, headers=signed("forged", body)) as forged:
                assert forged.status == 401
            async with http.post(url, data=body, headers=signed(SECRET, body)) as answer:
                assert answer.status == 200
        body = json.dumps(good).encode()
        async with http.post(url, data=body, headers=signed(SECRET, body)) as answer:
            assert answer.status == 200
        await bridge.count(1)
    assert [i.text for i in bridge.inbounds] == ["hi"]
    assert bridge.undecodable_events == 3

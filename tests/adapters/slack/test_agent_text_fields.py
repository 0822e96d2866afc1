"""Agent text in Slack's other text fields: a file's caption (`initial_comment`, read as
mrkdwn) and the thread's status line (assistant.threads.setStatus). Both carry agent
text (a file's caption, a tool's title), so neither may carry a mrkdwn control or a
broadcast: `&`, `<` and `>` go as Slack's entities and "@here", "@channel",
"@everyone" are parted. Through the real `SlackAdapter` against the fake Slack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from bridge.model import ChatRef
from tests.adapters.slack.test_agent_text import WORD_JOINER, assert_no_control
from tests.support.fake_slack import CHANNEL, FakeSlack

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

THREAD = ChatRef(CHANNEL, thread_id="1.0")
HOSTILE = "<!channel> <@U0CAROL> @here & @Everyone <https://evil.example|✅ Allow> a < b"
# What a reader of mrkdwn sees once Slack has read its entities.
SHOWN = "<!channel> <@U0CAROL> @here & @Everyone <https://evil.example|✅ Allow> a < b"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def unescaped(mrkdwn: str) -> str:
    shown = mrkdwn.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return shown.replace(WORD_JOINER, "")


async def test_a_files_caption_reaches_slack_without_a_control_or_a_broadcast(
    slack: FakeSlack,
) -> None:
    adapter = SlackAdapter(AsyncWebClient(token=slack.bot_token, base_url=slack.base_url))
    await adapter.upload(THREAD, "notes.txt", b"hello", caption=HOSTILE)
    [call] = slack.called("files.completeUploadExternal")
    comment = str(call.args["initial_comment"])
    assert_no_control(comment)
    assert unescaped(comment) == SHOWN


async def test_the_thread_status_line_carries_no_control_or_broadcast(slack: FakeSlack) -> None:
    adapter = SlackAdapter(AsyncWebClient(token=slack.bot_token, base_url=slack.base_url))
    await adapter.set_status(THREAD, f"is running {HOSTILE}…")
    [call] = slack.called("assistant.threads.setStatus")
    status = str(call.args["status"])
    assert_no_control(status)
    assert unescaped(status) == f"is running {SHOWN}…"


async def test_an_empty_caption_and_status_stay_empty(slack: FakeSlack) -> None:
    adapter = SlackAdapter(AsyncWebClient(token=slack.bot_token, base_url=slack.base_url))
    await adapter.upload(THREAD, "notes.txt", b"hello")
    await adapter.set_status(THREAD, "")
    [upload] = slack.called("files.completeUploadExternal")
    assert "initial_comment" not in upload.args
    [status] = slack.called("assistant.threads.setStatus")
    assert status.args["status"] == ""

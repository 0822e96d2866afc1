"""The fake Slack's native streaming (chat.startStream / appendStream / stopStream,
assistant.threads.setStatus), driven by the real slack_sdk `AsyncWebClient`: what a
streamed message shows, and each refusal the docs list (docs.slack.dev/reference/
methods/chat.startStream and its siblings). The bridge's fallbacks are tested against
these refusals, so each one must really be refused."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.models.messages.chunk import MarkdownTextChunk, TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from tests.support.fake_slack import ALICE, CHANNEL, DM_CHANNEL, TEAM, FakeSlack
from tests.support.fake_slack_streams import (
    MAX_LOADING_MESSAGES,
    MAX_STREAM_TEXT,
    STATUS_LIFE,
    STREAM_LIFE,
    STREAM_METHODS,
    STREAM_TIERS,
)
from tests.support.recording_adapter import FakeClock

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable

pytestmark = pytest.mark.anyio

THREAD = "1700000000.000001"  # the user's message the answer replies to
RECIPIENT = {"recipient_team_id": TEAM, "recipient_user_id": ALICE}
TOO_LONG = "x" * (MAX_STREAM_TEXT + 1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
async def slack(clock: FakeClock) -> AsyncIterator[FakeSlack]:
    async with FakeSlack(clock=clock) as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)


async def start(client: AsyncWebClient, **kw: Any) -> str:
    """A stream in the DM's thread (arguments override); its ts."""
    answer = await client.chat_startStream(**{"channel": DM_CHANNEL, "thread_ts": THREAD, **kw})
    return str(answer["ts"])


async def refusal(call: Awaitable[object]) -> str:
    """The error code of a Slack call that must fail."""
    with pytest.raises(SlackApiError) as refused:
        await call
    return str(refused.value.response["error"])


def task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "task_update", "id": task_id, **fields}


async def test_slack_sdk_has_the_streaming_methods() -> None:
    for name in ("chat_startStream", "chat_appendStream", "chat_stopStream"):
        assert callable(getattr(AsyncWebClient, name))
    assert callable(AsyncWebClient.assistant_threads_setStatus)


# --- a stream's life ---------------------------------------------------------------------


async def test_a_stream_is_a_message_in_the_thread_that_grows_until_it_stops(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await start(client, markdown_text="Hello")
    await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text=", Alice")
    posted = slack.messages[ts]
    assert (posted.thread_ts, posted.visible, posted.streaming) == (THREAD, "Hello, Alice", True)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "Was this useful?"}}]
    stopped = await client.chat_stopStream(
        channel=DM_CHANNEL, ts=ts, markdown_text=".", blocks=blocks
    )
    assert stopped["ts"] == ts
    assert (posted.text, posted.streaming, slack.stream(ts).state) == (
        "Hello, Alice.",
        False,
        "stopped",
    )
    assert posted.visible == "Hello, Alice.\nWas this useful?"


async def test_outside_a_dm_a_stream_with_its_recipient_is_accepted(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await start(client, channel=CHANNEL, markdown_text="hi", **RECIPIENT)
    assert slack.stream(ts).recipient == (TEAM, ALICE)


async def test_task_updates_keep_each_task_by_id_with_every_state(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await start(client, chunks=[task("t1", title="Run tests", status="pending")])
    updates = [
        task("t1", status="in_progress", details="pytest -q"),
        task("t2", title="Read logs", status="in_progress"),
        task("t1", status="complete", details=" (3 s)", output="12 passed"),
    ]
    await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, chunks=updates)
    tasks = slack.stream(ts).tasks
    assert list(tasks) == ["t1", "t2"]
    first = tasks["t1"]
    assert (first.title, first.status, first.details, first.output) == (
        "Run tests",
        "complete",
        "pytest -q (3 s)",
        "12 passed",
    )
    assert [state["status"] for state in first.history] == ["pending", "in_progress", "complete"]
    assert "[complete] Run tests" in slack.messages[ts].visible


async def test_the_sdk_helper_streams_text_and_tasks_as_chunks(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    streamer = await client.chat_stream(channel=DM_CHANNEL, thread_ts=THREAD, buffer_size=8)
    await streamer.append(markdown_text="Checking")
    await streamer.append(chunks=[TaskUpdateChunk(id="t1", title="ls", status="in_progress")])
    await streamer.append(markdown_text=" the files…")
    await streamer.stop(chunks=[TaskUpdateChunk(id="t1", title="ls", status="complete")])
    assert streamer.ts is not None
    stream = slack.stream(streamer.ts)
    assert (stream.mode, stream.text, stream.state) == ("chunks", "Checking the files…", "stopped")
    assert stream.tasks["t1"].status == "complete"


async def test_a_form_encoded_call_with_chunks_as_json_is_accepted(slack: FakeSlack) -> None:
    form = {
        "channel": DM_CHANNEL,
        "thread_ts": THREAD,
        "chunks": json.dumps([MarkdownTextChunk(text="from a form").to_dict()]),
    }
    headers = {"Authorization": f"Bearer {slack.bot_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{slack.base_url}chat.startStream", data=form, headers=headers) as answer,
    ):
        body = await answer.json()
    assert body["ok"] is True
    assert slack.stream(body["ts"]).text == "from a form"


async def test_slack_ends_a_stream_after_its_life_even_while_it_is_appended_to(
    slack: FakeSlack, client: AsyncWebClient, clock: FakeClock
) -> None:
    ts = await start(client, markdown_text="a")
    for _ in range(4):
        clock.now += STREAM_LIFE / 5
        await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="a")
    clock.now += STREAM_LIFE / 5
    assert (slack.messages[ts].streaming, slack.stream(ts).state) == (False, "expired")
    error = await refusal(client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="b"))
    assert error == "message_not_in_streaming_state"
    assert slack.messages[ts].visible == "aaaaa"


async def test_a_short_stream_life_can_be_set(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.stream_life = 0.0
    ts = await start(client, markdown_text="a")
    error = await refusal(client.chat_stopStream(channel=DM_CHANNEL, ts=ts))
    assert error == "message_not_in_streaming_state"


# --- refusals ----------------------------------------------------------------------------

START_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    # (case, chat.startStream arguments over a DM stream's, Slack's error)
    ("a channel without recipient", {"channel": CHANNEL}, "missing_recipient_team_id"),
    (
        "a channel without recipient user",
        {"channel": CHANNEL, "recipient_team_id": TEAM},
        "missing_recipient_user_id",
    ),
    (
        "a channel without recipient team",
        {"channel": CHANNEL, "recipient_user_id": ALICE},
        "missing_recipient_team_id",
    ),
    ("text over 12,000 characters", {"markdown_text": TOO_LONG}, "msg_too_long"),
    (
        "both text and chunks",
        {"markdown_text": "a", "chunks": [{"type": "markdown_text", "text": "b"}]},
        "cannot_provide_both_markdown_text_and_chunks",
    ),
    ("an unknown task display mode", {"task_display_mode": "grid"}, "invalid_arguments"),
]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [row[1:] for row in START_REFUSALS],
    ids=[row[0] for row in START_REFUSALS],
)
async def test_a_stream_slack_refuses_to_start_leaves_no_message(
    slack: FakeSlack, client: AsyncWebClient, arguments: dict[str, Any], error: str
) -> None:
    assert await refusal(start(client, **arguments)) == error
    assert slack.messages == {}


CHUNK_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    # (case, one chunk, Slack's error)
    ("an unknown chunk type", {"type": "image", "url": "x"}, "invalid_chunks"),
    ("a text chunk without text", {"type": "markdown_text"}, "invalid_chunks"),
    ("a text chunk over 12,000", {"type": "markdown_text", "text": TOO_LONG}, "msg_too_long"),
    ("a task without id", task("", title="t", status="pending"), "invalid_chunks"),
    ("a new task without title", task("t9", status="pending"), "invalid_chunks"),
    ("a new task without status", task("t9", title="t"), "invalid_chunks"),
    ("a task of unknown status", task("t1", status="done"), "invalid_chunks"),
    ("task details over 256", task("t1", status="complete", details="d" * 257), "invalid_chunks"),
    ("task output over 256", task("t1", status="complete", output="o" * 257), "invalid_chunks"),
    ("a plan without title", {"type": "plan_update"}, "invalid_chunks"),
    ("invalid blocks", {"type": "blocks", "blocks": [{"type": "poster"}]}, "invalid_chunks"),
]


@pytest.mark.parametrize(
    ("chunk", "error"),
    [row[1:] for row in CHUNK_REFUSALS],
    ids=[row[0] for row in CHUNK_REFUSALS],
)
async def test_a_request_with_a_bad_chunk_is_refused_whole(
    slack: FakeSlack, client: AsyncWebClient, chunk: dict[str, Any], error: str
) -> None:
    ts = await start(client, chunks=[task("t1", title="Run tests", status="in_progress")])
    text = {"type": "markdown_text", "text": "before the bad chunk"}
    appending = client.chat_appendStream(channel=DM_CHANNEL, ts=ts, chunks=[text, chunk])
    assert await refusal(appending) == error
    stream = slack.stream(ts)
    assert (stream.text, stream.tasks["t1"].status, stream.streaming) == ("", "in_progress", True)


async def test_a_known_task_may_leave_out_its_title(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await start(client, chunks=[task("t1", title="Run tests", status="in_progress")])
    await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, chunks=[task("t1", status="error")])
    assert (slack.stream(ts).tasks["t1"].title, slack.stream(ts).tasks["t1"].status) == (
        "Run tests",
        "error",
    )


async def a_stream_that_is(kind: str, slack: FakeSlack, client: AsyncWebClient) -> str:
    """The ts of a message in the state `kind` names."""
    if kind == "unknown":
        return "1700000999.000999"
    if kind == "posted":
        return str((await client.chat_postMessage(channel=DM_CHANNEL, text="plain"))["ts"])
    if kind == "chunks":
        return await start(client, chunks=[{"type": "markdown_text", "text": "a"}])
    if kind == "expired":
        slack.stream_life = 0.0  # Slack has ended it by the time of the next call
    ts = await start(client, markdown_text="a")
    if kind == "stopped":
        await client.chat_stopStream(channel=DM_CHANNEL, ts=ts)
    elif kind == "stopped by the user":
        slack.stop_by_user(ts)
    return ts


APPEND_REFUSALS: list[tuple[str, str, dict[str, Any], str]] = [
    # (case, the message appended to, chat.appendStream arguments, Slack's error)
    ("an unknown ts", "unknown", {"markdown_text": "b"}, "message_not_found"),
    ("an ordinary message", "posted", {"markdown_text": "b"}, "message_not_in_streaming_state"),
    ("a stopped stream", "stopped", {"markdown_text": "b"}, "message_not_in_streaming_state"),
    ("an expired stream", "expired", {"markdown_text": "b"}, "message_not_in_streaming_state"),
    ("a stream the user stopped", "stopped by the user", {"markdown_text": "b"}, "stopped_by_user"),
    ("another channel", "text", {"markdown_text": "b", "channel": "D0OTHER"}, "channel_not_found"),
    ("text over 12,000 characters", "text", {"markdown_text": TOO_LONG}, "msg_too_long"),
    ("nothing to append", "text", {}, "markdown_text_or_chunks_required"),
    (
        "chunks to a text stream",
        "text",
        {"chunks": [{"type": "markdown_text", "text": "b"}]},
        "streaming_mode_mismatch",
    ),
    ("text to a chunk stream", "chunks", {"markdown_text": "b"}, "streaming_mode_mismatch"),
]


@pytest.mark.parametrize(
    ("kind", "arguments", "error"),
    [row[1:] for row in APPEND_REFUSALS],
    ids=[row[0] for row in APPEND_REFUSALS],
)
async def test_an_append_slack_refuses_changes_nothing(
    slack: FakeSlack, client: AsyncWebClient, kind: str, arguments: dict[str, Any], error: str
) -> None:
    ts = await a_stream_that_is(kind, slack, client)
    before = slack.messages[ts].visible if ts in slack.messages else None
    appending = client.chat_appendStream(**{"channel": DM_CHANNEL, "ts": ts, **arguments})
    assert await refusal(appending) == error
    assert (slack.messages[ts].visible if ts in slack.messages else None) == before


async def test_a_stop_with_too_many_blocks_is_refused(client: AsyncWebClient) -> None:
    ts = await start(client, markdown_text="a")
    blocks = [{"type": "divider"}] * 51
    stopping = client.chat_stopStream(channel=DM_CHANNEL, ts=ts, blocks=blocks)
    assert await refusal(stopping) == "msg_blocks_too_many"


@pytest.mark.parametrize("method", sorted(STREAM_METHODS))
@pytest.mark.parametrize("lack", ["missing_scope", "unknown_method"])
async def test_a_workspace_without_streaming_refuses_every_streaming_method(
    slack: FakeSlack,
    client: AsyncWebClient,
    method: str,
    lack: Literal["missing_scope", "unknown_method"],
) -> None:
    slack.without_streaming = lack
    arguments = {"channel": DM_CHANNEL, "channel_id": DM_CHANNEL, "thread_ts": THREAD, "ts": "1"}
    with pytest.raises(SlackApiError) as refused:
        await client.api_call(method, json={**arguments, "status": "is thinking…"})
    assert refused.value.response["error"] == lack
    if lack == "missing_scope":
        assert refused.value.response["needed"] == "chat:write"
    assert slack.messages == {}
    assert slack.statuses == {}


# --- thread status -----------------------------------------------------------------------


async def test_a_status_shows_until_cleared_with_an_empty_one(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    await client.assistant_threads_setStatus(
        channel_id=DM_CHANNEL, thread_ts=THREAD, status="is thinking…", loading_messages=["Hm"]
    )
    assert slack.status_of(DM_CHANNEL, THREAD) == "is thinking…"
    assert slack.statuses[(DM_CHANNEL, THREAD)].loading_messages == ["Hm"]
    await client.assistant_threads_setStatus(channel_id=DM_CHANNEL, thread_ts=THREAD, status="")
    assert slack.status_of(DM_CHANNEL, THREAD) == ""


async def test_a_status_goes_after_two_minutes_without_a_reply(
    slack: FakeSlack, client: AsyncWebClient, clock: FakeClock
) -> None:
    await client.assistant_threads_setStatus(
        channel_id=DM_CHANNEL, thread_ts=THREAD, status="is thinking…"
    )
    clock.now += STATUS_LIFE - 1
    assert slack.status_of(DM_CHANNEL, THREAD) == "is thinking…"
    clock.now += 1
    assert slack.status_of(DM_CHANNEL, THREAD) == ""


@pytest.mark.parametrize("reply", ["posted", "streamed"])
async def test_a_reply_of_the_bot_in_the_thread_clears_its_status_only(
    slack: FakeSlack, client: AsyncWebClient, reply: str
) -> None:
    other = "1700000000.000777"
    for thread in (THREAD, other):
        await client.assistant_threads_setStatus(
            channel_id=DM_CHANNEL, thread_ts=thread, status="is working…"
        )
    if reply == "posted":
        await client.chat_postMessage(channel=DM_CHANNEL, thread_ts=THREAD, text="done")
    else:
        await start(client, markdown_text="done")
    assert slack.status_of(DM_CHANNEL, THREAD) == ""
    assert slack.status_of(DM_CHANNEL, other) == "is working…"


STATUS_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("no channel", {"channel_id": ""}, "channel_not_found"),
    ("no thread", {"thread_ts": ""}, "invalid_thread_ts"),
    (
        "too many loading messages",
        {"loading_messages": ["…"] * (MAX_LOADING_MESSAGES + 1)},
        "invalid_arguments",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [row[1:] for row in STATUS_REFUSALS],
    ids=[row[0] for row in STATUS_REFUSALS],
)
async def test_a_status_slack_refuses_is_not_shown(
    slack: FakeSlack, client: AsyncWebClient, arguments: dict[str, Any], error: str
) -> None:
    setting = client.assistant_threads_setStatus(
        **{"channel_id": DM_CHANNEL, "thread_ts": THREAD, "status": "is thinking…", **arguments}
    )
    assert await refusal(setting) == error
    assert slack.statuses == {}


# --- rate limits -------------------------------------------------------------------------


async def test_without_limits_the_streaming_methods_are_never_limited(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await start(client, markdown_text="a")
    for _ in range(int(STREAM_TIERS["chat.appendStream"][0]) + 5):
        await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="a")
    assert slack.limited == []


@pytest.fixture
async def limited(clock: FakeClock) -> AsyncIterator[tuple[FakeSlack, AsyncWebClient]]:
    async with FakeSlack(enforce_limits=True, clock=clock) as fake:
        yield fake, AsyncWebClient(token=fake.bot_token, base_url=fake.base_url)


async def test_appends_beyond_tier_4_hear_429_with_retry_after(
    limited: tuple[FakeSlack, AsyncWebClient], clock: FakeClock
) -> None:
    slack, client = limited
    ts = await start(client, markdown_text="a")
    burst, _ = STREAM_TIERS["chat.appendStream"]
    for _ in range(int(burst)):
        await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="a")
    with pytest.raises(SlackApiError) as refused:
        await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="b")
    answer = refused.value.response
    assert (answer.status_code, answer["error"]) == (429, "ratelimited")
    assert int(answer.headers["Retry-After"]) >= 1
    assert len(slack.limited) == 1
    clock.now += 1.0
    await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="c")


async def test_appends_at_100_a_minute_are_never_limited(
    limited: tuple[FakeSlack, AsyncWebClient], clock: FakeClock
) -> None:
    slack, client = limited
    ts = await start(client, markdown_text="a")
    for _ in range(150):  # 90 s, three times the bucket
        await client.chat_appendStream(channel=DM_CHANNEL, ts=ts, markdown_text="a")
        clock.now += 0.6
    assert slack.limited == []


@pytest.mark.parametrize("method", ["chat.startStream", "chat.stopStream"])
async def test_starts_and_stops_beyond_tier_2_hear_429(
    limited: tuple[FakeSlack, AsyncWebClient], method: str
) -> None:
    slack, client = limited
    burst, _ = STREAM_TIERS[method]
    streams = [await start(client, markdown_text="a") for _ in range(int(burst))]
    if method == "chat.stopStream":
        for ts in streams:
            await client.chat_stopStream(channel=DM_CHANNEL, ts=ts)
        calling: Awaitable[object] = client.chat_stopStream(channel=DM_CHANNEL, ts=streams[0])
    else:
        calling = start(client, markdown_text="a")
    assert await refusal(calling) == "ratelimited"
    assert [call.method for call in slack.limited] == [method]


async def test_statuses_beyond_their_budget_hear_429(
    limited: tuple[FakeSlack, AsyncWebClient],
) -> None:
    slack, client = limited
    burst, _ = STREAM_TIERS["assistant.threads.setStatus"]
    for n in range(int(burst)):
        await client.assistant_threads_setStatus(
            channel_id=DM_CHANNEL, thread_ts=THREAD, status=f"step {n}"
        )
    setting = client.assistant_threads_setStatus(
        channel_id=DM_CHANNEL, thread_ts=THREAD, status="one too many"
    )
    assert await refusal(setting) == "ratelimited"
    assert slack.status_of(DM_CHANNEL, THREAD) == f"step {int(burst) - 1}"

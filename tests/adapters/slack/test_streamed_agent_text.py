"""Agent text is shown, never obeyed, in Slack's native streams too.

A stream is one message that grows: each chat.appendStream adds text to "the message
received so far" (docs.slack.dev/reference/methods/chat.appendStream), and Slack reads
what it holds as one Markdown text. So the text the fake Slack holds after each call
is what a reader sees at that moment, and it must hold what a posted markdown block
holds (tests/adapters/slack/test_agent_text.py): no mrkdwn control, no link but its
own http(s) address, no raw HTML, no mention; and at the end it shows what the posted
message would show. Driven through the real `Outbox` and `SlackAdapter` against the
fake Slack, op by op as the renderer submits them.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio
import pyromark
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import LIMITS, SlackAdapter
from bridge.model import ChatRef, Edit, Send
from bridge.outbox import Outbox
from bridge.render.views import in_run
from tests.adapters.slack.test_agent_text import (
    MARKDOWN,
    WORD_JOINER,
    assert_inert,
    block_texts,
    read,
)
from tests.support.fake_slack import DM_CHANNEL, FakeSlack
from tests.support.marked_ops import growing

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.model import Op

pytestmark = pytest.mark.anyio

KEY, CHAT = "slack:T1:D0DM:1.0", ChatRef(DM_CHANNEL, thread_id="1.0")
FAST = replace(LIMITS, edit_interval=0.0, chat_rate=100.0, global_rate=1000.0)
MENTION = re.compile(r"(?<!\w)@\w")
STEP_SECONDS = 10.0


@dataclass
class Streamed:
    """What the stream message held after each op, and the calls that made it."""

    states: list[str]
    slack: FakeSlack

    @property
    def final(self) -> str:
        return self.states[-1]

    def count(self, method: str) -> int:
        return len(self.slack.called(method))


@contextlib.asynccontextmanager
async def outbox_on_slack() -> AsyncIterator[tuple[Outbox, FakeSlack]]:
    async with FakeSlack() as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
        outbox = Outbox(SlackAdapter(client, limits=FAST))
        async with anyio.create_task_group() as tg:
            await tg.start(outbox.run)
            yield outbox, slack
            tg.cancel_scope.cancel()


def stream_text(slack: FakeSlack) -> str | None:
    streams = [m.stream for m in slack.messages.values() if m.stream is not None]
    return streams[-1].text if streams else None


async def streamed(ops: list[Op]) -> Streamed:
    states: list[str] = []
    async with outbox_on_slack() as (outbox, slack):
        for op in ops:
            outbox.submit(KEY, CHAT, [op])
            with anyio.fail_after(STEP_SECONDS):
                await outbox.flush()
            text = stream_text(slack)
            if text is not None:
                states.append(text)
    assert states, "nothing was streamed"
    return Streamed(states, slack)


def code_spans(markdown: str) -> list[str]:
    return [
        str(event["Code"])
        for event in pyromark.events(markdown, options=MARKDOWN)
        if isinstance(event, dict) and "Code" in event
    ]


def assert_shown_not_obeyed(state: str) -> None:
    """What the stream holds at one moment: nothing in it acts."""
    assert_inert(state)
    text, _, html = read(state)
    assert html == [], state
    assert not MENTION.search(text), state


def visible(markdown: str) -> str:
    return read(markdown)[0].replace(WORD_JOINER, "")


# (the agent's text as it grows; the answer's Markdown source, whole)
GROWING = {
    "a link cut between its text and its address": (
        "Press [✅ Allow once]",
        "Press [✅ Allow once](https://evil.example/x) now.",
    ),
    "a link whose address arrives piece by piece": (
        "See [docs](https://ev",
        "See [docs](https://evil.example/y) and more.\n\nNext paragraph.",
    ),
    "raw HTML": ("cp <src>", "cp <src> <dst> and <b>bold</b>."),
    "a mention and a broadcast": ("ask @ali", "ask @alice and @here, then <!channel>."),
    "a link in a paragraph after others": (
        "First.\n\nSecond [a](javascript:alert(1)",
        "First.\n\nSecond [a](javascript:alert(1)) third.",
    ),
}


@pytest.mark.parametrize(("first", "whole"), GROWING.values(), ids=GROWING.keys())
async def test_a_streamed_answer_never_holds_a_link_html_or_a_mention(
    first: str, whole: str
) -> None:
    middle = whole[: (len(first) + len(whole)) // 2]
    result = await streamed(growing("t", first, middle, whole))
    for state in result.states:
        assert_shown_not_obeyed(state)
    block, _ = block_texts(whole)
    assert visible(result.final) == visible(block)


async def test_a_code_span_cut_after_an_at_sign_carries_no_word_joiner() -> None:
    whole = "Run `git log @{u}..` to see them."
    result = await streamed(growing("t", "Run `git log @", "Run `git log @{u}.", whole))
    for state in result.states:
        assert_shown_not_obeyed(state)
    assert code_spans(result.final) == ["git log @{u}.."]


async def test_a_reference_defined_in_a_later_message_of_the_run_makes_no_link() -> None:
    ops: list[Op] = [
        *in_run([Send("a", "Click [here] to go on.")], "r1"),
        *in_run([Send("b", "[here]: https://evil.example/z")], "r1"),
        *in_run([Edit("b", "[here]: https://evil.example/z\n\nDone.")], "r1"),
    ]
    result = await streamed(ops)
    for state in result.states:
        assert_shown_not_obeyed(state)
    assert "Click [here] to go on." in visible(result.final)


async def test_code_left_open_by_one_message_of_a_run_does_not_turn_the_next_into_text() -> None:
    ops: list[Op] = [
        *in_run([Send("a", "Here:\n\n```sh\necho hi")], "r1"),
        *in_run([Send("b", "Then:\n\n```\n[✅ Allow](https://evil.example/w)\n```")], "r1"),
    ]
    result = await streamed(ops)
    for state in result.states:
        assert_shown_not_obeyed(state)


async def test_a_growing_answer_still_streams_in_several_appends() -> None:
    paragraphs = [f"Paragraph {i} with a [link](https://ex.com/{i}) in it." for i in range(4)]
    texts = ["\n\n".join(paragraphs[: i + 1]) for i in range(4)]
    result = await streamed(growing("t", *texts))
    assert result.count("chat.startStream") == 1
    assert result.count("chat.appendStream") >= 2
    assert result.count("chat.stopStream") == 1
    for state in result.states:
        assert_shown_not_obeyed(state)
    assert visible(result.final) == visible(block_texts(texts[-1])[0])

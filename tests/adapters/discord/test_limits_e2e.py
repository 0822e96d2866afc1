"""Discord's limits end to end: 429s retried after their `retry_after` without losing a
word, an answer over 2,000 characters split into messages that each render (code
fences closed and reopened), and a missing permission said once, clearly."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.adapters.discord.harness import WAIT, discord_bridge, shown, thread_of
from tests.support.fake_discord import ALICE, GENERAL
from tests.support.fake_llm import Reply

if TYPE_CHECKING:
    from bridge.options import BridgeOptions
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

ANSWER = "Every word of this answer arrives, however often Discord says to wait a moment."


@pytest.mark.parametrize(
    ("method", "times"),
    [("PATCH", 2), ("POST", 1), ("PATCH", 5)],
    ids=[
        "edits retried by discord.py",
        "a send retried",
        "given up by discord.py, then the outbox",
    ],
)
async def test_a_429_is_waited_out_and_no_word_is_lost(
    fake_llm: FakeLLM, opts: BridgeOptions, method: str, times: int
) -> None:
    fake_llm.add("wait", Reply(text=ANSWER, delay=0.1))
    async with discord_bridge(opts) as fake:
        mention = await fake.user_says(GENERAL, "wait for it", mentions_bot=True)
        thread = await thread_of(fake, mention)
        path = f"/channels/{thread.id}/messages" + ("/*" if method == "PATCH" else "")
        fake.fail(method, path, status=429, retry_after=0.2, times=times)
        reply = await shown(fake, "a moment.", thread.id)
        await shown(fake, "done", thread.id)
    assert reply.content == ANSWER
    assert len([c for c in fake.limited if c.method == method]) == times
    assert not [m for m in fake.bot_messages(thread.id) if "moment" in m.content and m != reply]


CODE = "\n".join(f"    value_{i} = compute({i})  # line {i} of the listing" for i in range(80))
LONG = (
    "Here is the whole module.\n\n```python\ndef listing():\n"
    + CODE
    + "\n```\n\n"
    + "\n\n".join(f"Paragraph {i}: " + "words " * 40 for i in range(6))
    + "\n\nTHE-END"
)


async def test_an_answer_over_2000_characters_is_split_and_each_message_renders(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    assert len(LONG) > 2 * 2000
    fake_llm.add("the module", Reply(text=LONG))
    async with discord_bridge(opts) as fake:
        mention = await fake.user_says(GENERAL, "show me the module", mentions_bot=True)
        thread = await thread_of(fake, mention)
        await shown(fake, "THE-END", thread.id)
        await shown(fake, "done", thread.id)
        pieces = [
            m.content
            for m in fake.bot_messages(thread.id)
            if "value_" in m.content or "words" in m.content
        ]
    assert len(pieces) >= 3
    assert all(len(p) <= 2000 for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces), "a code fence left open"
    joined = "\n".join(pieces)
    assert all(f"value_{i} = compute({i})" in joined for i in range(80))
    assert fake.limited == []


async def test_a_channel_where_the_bot_may_not_open_threads_is_told_once(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("help", Reply(text="must not run"))
    async with discord_bridge(opts) as fake:
        fake.fail("POST", f"/channels/{GENERAL}/messages/*/threads", times=3)
        for _ in range(3):
            await fake.user_says(GENERAL, "help me please", mentions_bot=True)
        await shown(fake, "can't start a thread here", GENERAL)
        await fake.wait_for(
            lambda: len(fake.called("POST", f"/channels/{GENERAL}/messages/*/threads")) == 3
        )
        told = [m for m in fake.bot_messages(GENERAL) if "can't start a thread" in m.content]
    assert len(told) == 1
    assert "Create Public Threads" in told[0].content
    assert fake.threads == []
    assert fake_llm.requests == []


async def test_where_the_bot_may_not_even_post_the_person_is_told_directly(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    async with discord_bridge(opts) as fake:
        fake.fail("POST", f"/channels/{GENERAL}/messages/*/threads")
        fake.fail("POST", f"/channels/{GENERAL}/messages", code=50001, message="Missing Access")
        await fake.user_says(GENERAL, "help me please", mentions_bot=True)
        dm = fake.dm_channel(ALICE)
        await shown(fake, "can't start a thread here", dm, within=WAIT)
    assert fake.bot_messages(GENERAL) == []
    assert fake_llm.requests == []

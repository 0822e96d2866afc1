"""Many threads in one Slack channel, end to end, with Slack's production limits: the fake
Slack enforcing each method's documented budget (tests/support/fake_slack_limits.py) →
bolt → SlackAdapter with its production `LIMITS` → Bridge → real pi agents streaming
long answers at once.

Slack paces only chat.postMessage per channel; streams' appends, starts, stops and
edits each have a workspace budget of their own. So the threads of one channel must
not wait for one shared one-a-second pace (issue 34), and the fake must never answer
429."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import LIMITS, SlackAdapter
from adapters.slack.runner import PREFIXES, slack_intake
from adapters.slack.settings import SlackSettings
from bridge.service import Bridge
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply
from tests.support.fake_slack import ALICE, CHANNEL, FakeSlack
from tests.support.flaky_store import open_flaky

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.model import PlatformLimits
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import Call

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

THREADS = 4
WAIT = 90.0
WORDS = 120  # an answer of this many words, one every 50 ms: about 6 s of streaming
ANSWER = " ".join(f"w{n}" for n in range(WORDS)) + " END"
SHOWING = frozenset(
    {"chat.startStream", "chat.appendStream", "chat.stopStream", "chat.update", "chat.postMessage"}
)


@contextlib.asynccontextmanager
async def one_channel(
    home: AgentHome, version: str, tmp_path: Path, limits: PlatformLimits
) -> AsyncIterator[FakeSlack]:
    opts = options(
        tmp_path / "data",
        home.argv(version),
        home.env(),
        allowed_users=frozenset({ALICE}),
        max_agents=THREADS + 1,
        max_per_user=THREADS + 1,
    )
    store = await open_flaky(opts.data_dir, 0)
    try:
        async with FakeSlack(enforce_limits=True) as slack:
            settings = SlackSettings(
                bot_token=slack.bot_token, api_base_url=slack.base_url, app_token=slack.app_token
            )
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
            adapter = SlackAdapter(client, limits=limits)
            async with (
                Bridge(adapter, store, opts, prefixes=PREFIXES) as bridge,
                slack_intake(settings, bridge, adapter),
            ):
                yield slack
                await bridge.outbox.flush()
    finally:
        await store.aclose()


def busiest_second(calls: list[Call]) -> int:
    """The most calls that arrived within any one second."""
    times = sorted(call.at for call in calls)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


async def run_threads(slack: FakeSlack, fake_llm: FakeLLM) -> list[Call]:
    """Start `THREADS` threads in one channel at once; every answer whole; the calls that
    showed them in the channel."""
    fake_llm.add("long answer", Reply(text=ANSWER, delay=0.05))
    roots = []
    for n in range(THREADS):
        event = await slack.mention(f"long answer please {n}", channel=CHANNEL)
        roots.append(str(event["payload"]["event"]["ts"]))

    def whole() -> bool:
        shown = {
            m.thread_ts
            for m in slack.messages.values()
            if not m.deleted and "END" in m.visible and not m.streaming
        }
        return all(root in shown for root in roots)

    await slack.wait_until(whole, WAIT)
    await anyio.sleep(1.0)  # the runs' last status edits
    return [c for c in slack.calls if c.method in SHOWING]


async def test_threads_of_one_channel_are_paced_per_method_not_by_the_channel(
    agent_home: AgentHome, version: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with one_channel(agent_home, version, tmp_path, LIMITS) as slack:
        showing = await run_threads(slack, fake_llm)

    assert slack.limited == []  # no method over its budget
    # One channel's pace would allow one call a second and a short burst; each
    # method's own budget lets the threads' streams go on together.
    assert busiest_second(showing) >= 4
    posts = [c for c in showing if c.method == "chat.postMessage"]
    assert busiest_second(posts) <= 3  # the channel's posts keep to Slack's 1/s


async def test_a_429_holds_only_the_method_refused(
    agent_home: AgentHome, version: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A rate limit on chat.appendStream holds appends for its Retry-After; the other
    methods (posting the runs' status, starting streams) go on meanwhile, and nothing is
    lost."""
    async with one_channel(agent_home, version, tmp_path, LIMITS) as slack:
        slack.fail("chat.appendStream", "ratelimited", status=429, retry_after=2)
        showing = await run_threads(slack, fake_llm)

    refused = next(c for c in slack.calls if c.method == "chat.appendStream")
    appends = [c for c in showing if c.method == "chat.appendStream" and c is not refused]
    assert appends
    assert min(c.at for c in appends) >= refused.at + 2.0  # held for its Retry-After
    others = [c for c in showing if c.method != "chat.appendStream"]
    assert any(refused.at < c.at < refused.at + 2.0 for c in others)

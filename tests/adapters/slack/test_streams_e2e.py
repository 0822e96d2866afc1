"""Slack answers streamed natively, end to end: fake Slack (with the streaming methods'
real rules, tests/support/fake_slack_streams.py) → bolt → SlackAdapter → Bridge → real
pi agent → chat.startStream / appendStream / stopStream into the thread; and the
fallbacks: a workspace without the methods shows the whole answer once by editing, and
a run whose stream Slack ends goes on in a new one. A run's tool calls are task cards
in its stream, and the thread's status line names the running tool."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from adapters.slack.runner import PREFIXES, slack_intake
from adapters.slack.settings import SlackSettings
from bridge.model import PlatformLimits
from bridge.service import Bridge
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, TEAM, FakeSlack
from tests.support.flaky_store import open_flaky

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import Posted

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

LIMITS = PlatformLimits(
    max_text=12_000, max_button_data=2_000, edit_interval=0.2, chat_rate=100.0, global_rate=1000.0
)
WAIT = 30.0
ANSWER = "Streamed natively: one word after another, into the thread, until it is whole."


@contextlib.asynccontextmanager
async def slack_bridge(
    home: AgentHome, version: str, tmp_path: Path, **fake: Any
) -> AsyncIterator[FakeSlack]:
    """The fake Slack (`fake`: its settings) with the whole bridge on it, over Socket Mode."""
    opts = options(
        tmp_path / "data", home.argv(version), home.env(), allowed_users=frozenset({ALICE})
    )
    store = await open_flaky(opts.data_dir, 0)
    try:
        async with FakeSlack(**fake) as slack:
            settings = SlackSettings(
                bot_token=slack.bot_token, api_base_url=slack.base_url, app_token=slack.app_token
            )
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
            adapter = SlackAdapter(client, limits=LIMITS)
            async with (
                Bridge(adapter, store, opts, prefixes=PREFIXES) as bridge,
                slack_intake(settings, bridge, adapter),
            ):
                yield slack
    finally:
        await store.aclose()


async def answered(slack: FakeSlack, fake_llm: FakeLLM) -> tuple[str, Posted]:
    """Mention the bot; once the run is done, the thread and the message holding the
    answer (the only one that shows any of it)."""
    fake_llm.add("stream", Reply(text=ANSWER, delay=0.05))
    root = str((await slack.mention("stream it please"))["payload"]["event"]["ts"])

    def with_answer() -> list[Posted]:
        return [m for m in slack.messages.values() if not m.deleted and "Streamed" in m.visible]

    def done() -> bool:
        return any("done" in m.visible for m in slack.messages.values() if not m.deleted)

    await slack.wait_until(lambda: done() and any(ANSWER in m.visible for m in with_answer()), WAIT)
    [message] = with_answer()
    assert message.thread_ts == root
    return root, message


def calls_on(slack: FakeSlack, method: str, ts: str) -> list[dict[str, Any]]:
    return [c.args for c in slack.called(method) if c.args.get("ts") == ts]


async def test_an_answer_in_a_thread_streams_and_ends_as_the_whole_answer_once(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    async with slack_bridge(agent_home, version, tmp_path) as slack:
        _, message = await answered(slack, fake_llm)
        stream = slack.stream(message.ts)
        assert stream.state == "stopped"
        assert stream.recipient == (TEAM, ALICE)  # a channel thread names its reader
        assert message.visible == ANSWER
        assert calls_on(slack, "chat.appendStream", message.ts)  # it grew, not at once
        assert len(calls_on(slack, "chat.stopStream", message.ts)) == 1
        assert calls_on(slack, "chat.update", message.ts) == []


async def test_a_workspace_without_streams_gets_the_answer_by_editing(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    async with slack_bridge(
        agent_home, version, tmp_path, without_streaming="missing_scope"
    ) as slack:
        _, message = await answered(slack, fake_llm)
        assert message.stream is None
        assert message.visible == ANSWER
        assert len(slack.called("chat.startStream")) == 1  # refused once, not asked again
        assert calls_on(slack, "chat.update", message.ts)


async def test_a_run_slack_ends_the_stream_of_goes_on_in_a_new_one_with_every_word_once(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    async with slack_bridge(agent_home, version, tmp_path, stream_life=0.3) as slack:
        fake_llm.add("stream", Reply(text=ANSWER, delay=0.05))
        root = str((await slack.mention("stream it please"))["payload"]["event"]["ts"])
        await slack.wait_until(lambda: _status_done(slack), WAIT)
        streamed = [m for m in slack.messages.values() if m.stream is not None]
        assert len(streamed) >= 2, "the answer outlived its stream and went on in another"
        assert all(m.thread_ts == root for m in streamed)
        states = [slack.stream(m.ts).state for m in streamed]
        assert "expired" in states[:-1]
        assert "".join(slack.stream(m.ts).text for m in streamed) == ANSWER
        assert slack.called("chat.update") == [] or all(
            c.args.get("ts") not in {m.ts for m in streamed} for c in slack.called("chat.update")
        )


async def test_a_run_with_two_tool_calls_is_one_stream_with_a_task_card_for_each(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    slow = "sleep 0.6; echo FIRST-$((40+2))"
    fake_llm.add(
        "tools",
        Reply(
            text="Looking around first.",
            tool_calls=[
                ToolCall("bash", {"command": slow}),
                ToolCall("read", {"path": "/nonexistent/NOPE.txt"}),
            ],
        ),
        Reply(text="All done here.", delay=0.02),
    )
    async with slack_bridge(agent_home, version, tmp_path) as slack:
        root = str((await slack.mention("use your tools"))["payload"]["event"]["ts"])
        await slack.wait_until(lambda: _status_done(slack), WAIT)
        [message] = [m for m in slack.messages.values() if m.stream is not None]
        stream = slack.stream(message.ts)
        assert message.thread_ts == root
        assert stream.state == "stopped"
        assert stream.text == "Looking around first.\n\nAll done here."
        first, second = stream.tasks.values()
        assert first.title.startswith("bash sleep 0.6")
        assert first.history[0]["status"] == "in_progress"
        assert first.status == "complete"
        assert "FIRST-42" in first.output
        assert second.title.startswith("read /nonexistent/NOPE.txt")
        assert second.status == "error"  # its start may merge into its end: it fails at once
        # No message of their own: the tool calls are only cards in the stream.
        texts = [m.visible for m in slack.messages.values() if m.stream is None]
        assert not any("FIRST-42" in t or "NOPE.txt" in t for t in texts), texts
        set_to = [c.args["status"] for c in slack.called("assistant.threads.setStatus")]
        assert any(s.startswith("is running bash sleep 0.6") for s in set_to), set_to
        assert set_to[-1] == ""  # cleared when the run's stream ended
        assert slack.status_of(message.channel, root) == ""


def _status_done(slack: FakeSlack) -> bool:
    """The run's status says it is over (its final edit comes after the stream's stop)."""
    return any("✅ done" in m.visible for m in slack.messages.values() if not m.deleted)

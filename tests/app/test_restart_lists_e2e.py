"""After a restart, a new list is a new message: `pi-bridge run` as a process on Telegram
and on Slack, a run left going under its host (bridge/conversation/hosts.py), SIGTERM, a second
process on the same data dir.

The messages of the run the first process left unfinished are adopted by the second
(so its replay edits them); the bridge's own one-off messages of that time (a picker,
a notice, a waiting message and the /queue list) are among them. The same commands
sent to the second process must post new messages below, leaving the old ones as they
were: their names must differ from every name an earlier process gave.
"""

from __future__ import annotations

import signal
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from tests.app.test_reattach_e2e import CHAT
from tests.app.test_reattach_e2e import env_for as telegram_env_for
from tests.app.test_reattach_slack_e2e import env_for as slack_env_for
from tests.app.test_reattach_slack_e2e import halt, until_shown
from tests.support.cli import WAIT, bridge_process, kill_agents, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import FakeSlack
from tests.support.fake_telegram import FakeTelegram

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

# Long enough to outlast both bridges: the test ends it by killing the agent.
TOOL = "printf 'first-%s\\n' half; sleep 90"
QUICK = 20.0  # for an answer of a bridge already up, its agent taken back
# (command, a text only its answer shows, before and after the restart)
ROUNDS = [
    ("verbose", "Show tool calls:", "Show tool calls:"),
    ("grants", "No grants", "No grants"),
    ("later write a poem", "“write a poem”", "“write a limerick”"),
    ("queue", "Waiting:", "Waiting:"),
]


def script(fake_llm: FakeLLM) -> None:
    fake_llm.add("long job", Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]))


def second(command: str) -> str:
    return command.replace("poem", "limerick")


async def posted(waiting: Awaitable[None]) -> bool:
    """Whether `waiting` saw the new message it waits for."""
    try:
        await waiting
    except TimeoutError:
        return False
    return True


def sent_since(calls: Sequence[Any], start: int, method: str, text: str) -> bool:
    """Whether a `method` call after the first `start` calls carried `text`."""
    return any(
        c.method == method and text in str(getattr(c, "params", None) or c.args)
        for c in calls[start:]
    )


async def test_telegram_lists_after_a_restart_are_new_messages(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    script(fake_llm)
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        env = telegram_env_for(tmp_path, agent_home, telegram)
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(CHAT, "start the long job")
                await telegram.bot_message("first-half", CHAT, within=WAIT)
                for command, before, _ in ROUNDS:
                    telegram.message(CHAT, f"/{command}")
                    await telegram.bot_message(before, CHAT, within=WAIT)
                assert await stop(process) == 0
            old = [telegram.find(before, CHAT) for _, before, _ in ROUNDS]
            was = [m.text if m is not None else None for m in old]
            restarted, missing = len(telegram.calls), []
            async with bridge_process(tmp_path, env, "second.log") as process:
                for command, _, after in ROUNDS:
                    telegram.message(CHAT, f"/{second(command)}")
                    sent = partial(sent_since, telegram.calls, restarted, "sendMessage", after)
                    if not await posted(telegram.wait_for(sent, QUICK)):
                        missing.append(command)
                assert await stop(process) == 0
        finally:
            kill_agents(data)
    assert None not in was
    ids = {m.message_id for m in old if m is not None}
    edits = [
        c
        for c in telegram.calls[restarted:]
        if c.method == "editMessageText" and int(c.params["message_id"]) in ids
    ]
    assert edits == [], "a message posted before the restart was edited for a new one"
    assert missing == [], "after the restart, these posted no new message"
    assert [m.text if m is not None else None for m in old] == was


async def test_slack_lists_after_a_restart_are_new_messages(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    script(fake_llm)
    data = tmp_path / "data"
    async with FakeSlack() as slack:
        env = slack_env_for(tmp_path, agent_home, slack, "stream")
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                await slack.connected()
                root = (await slack.mention("run the long job"))["payload"]["event"]["ts"]
                await until_shown(slack, root, "bash")
                old = []
                for command, before, _ in ROUNDS:
                    await slack.thread_message(f"!{command}", root)
                    old.append(await until_shown(slack, root, before))
                await halt(process, signal.SIGTERM)
            was = [m.visible for m in old]
            restarted, missing = len(slack.calls), []
            async with bridge_process(tmp_path, env, "second.log") as process:
                await slack.connected()
                for command, _, after in ROUNDS:
                    await slack.thread_message(f"!{second(command)}", root)
                    sent = partial(sent_since, slack.calls, restarted, "chat.postMessage", after)
                    if not await posted(slack.wait_until(sent, QUICK)):
                        missing.append(command)
                assert await stop(process) == 0
        finally:
            kill_agents(data)
    ts = {m.ts for m in old}
    edits = [c for c in slack.calls[restarted:] if c.method == "chat.update" and c.args["ts"] in ts]
    assert edits == [], "a message posted before the restart was updated for a new one"
    assert missing == [], "after the restart, these posted no new message"
    assert [m.visible for m in old] == was

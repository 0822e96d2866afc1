"""The Telegram and the Slack journeys, the same in both deployments: one `pi-bridge run`
with `--role all`, and a `--role frontend` with a `--role worker`, each on a real
redis-server (so the roles are all that differs). The real python-telegram-bot and
slack-bolt against the fake platforms, the real agent against the fake LLM.

Each journey walks one conversation through what a person does with it, with the same
assertions in both deployments:
- a prompt answered with a tool's help: the tool and the answer show, the status ends
  "✅ done" (on Slack the answer streams natively, chat.startStream);
- a message sent while the agent works is marked as taken and steers the run (the model
  sees it once, and the unsteered ending never shows);
- a dangerous bash command asks first and runs only once its "Allow once" is pressed;
- /stop (Telegram) or the Stop button (Slack) ends a running tool: the status says so.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.app.test_run_e2e import CHAT, telegram_env
from tests.support.cli import DRAIN, WAIT, bridge_process, cli_env, kill_agents, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, FakeSlack
from tests.support.fake_telegram import FakeTelegram
from tests.support.journeys import (
    NOT_REACHED,
    STEERED,
    UNSTEERED,
    requests_with,
    script_long_run,
    tool_results,
)
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import Posted
    from tests.support.fake_telegram import Message

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(240),
]

DEPLOYMENTS = pytest.mark.parametrize(
    "roles", [("all",), ("frontend", "worker")], ids=["all", "split"]
)
GREETED = "Greeted the world."
WIPED = "Wiped the junk."
# The sum shows only in what the command printed, never in the call itself: it is in a
# tool result only if the command ran.
WIPE = "rm -rf ./junk; echo WIPED-$((40+2))"
RAN = "WIPED-42"
TELEGRAM = "[telegram]\npoll_timeout = 1\n"


def script(llm: FakeLLM) -> None:
    """The model's turns for the four steps of a journey."""
    llm.add(
        "greet",
        Reply(tool_calls=[ToolCall("bash", {"command": "echo hello-from-bash"})]),
        Reply(text=GREETED),
    )
    # Long enough for a steer to cross a frontend, Redis and a worker while it runs.
    llm.add(
        "slowly",
        Reply(text="On it.", tool_calls=[ToolCall("bash", {"command": "sleep 6; echo slept"})]),
        Reply(text=UNSTEERED),
    )
    llm.add("STEER-PURPLE", Reply(text=STEERED))
    llm.add("wipe", Reply(tool_calls=[ToolCall("bash", {"command": WIPE})]), Reply(text=WIPED))
    script_long_run(llm, "long job")


def configured(
    tmp_path: Path, env: dict[str, str], name: str, role: str, more: str
) -> dict[str, str]:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[worker]\nname = "{name}"\nlease_ttl = 3\n[limits]\ndrain_timeout = {DRAIN}\n{more}',
        encoding="utf-8",
    )
    return env | {"PI_BRIDGE_CONFIG": str(path), "PI_BRIDGE_ROLE": role}


@contextlib.asynccontextmanager
async def deployment(
    tmp_path: Path, env: dict[str, str], roles: tuple[str, ...], more: str = ""
) -> AsyncIterator[None]:
    """redis-server and a process per role on it, which stop cleanly at the end (or are
    killed, with their agents, when the test fails)."""
    env = env | {"PI_BRIDGE_APPROVALS": "dangerous"}
    with RedisServer(tmp_path / "redis") as redis:
        env["PI_BRIDGE_STORE"] = redis.url
        try:
            async with contextlib.AsyncExitStack() as stack:
                processes = [
                    await stack.enter_async_context(
                        bridge_process(
                            tmp_path, configured(tmp_path, env, f"p{n}", role, more), f"p{n}.log"
                        )
                    )
                    for n, role in enumerate(roles)
                ]
                yield
                for process in reversed(processes):
                    assert await stop(process) == 0
        finally:
            kill_agents(tmp_path / "data")


# --- Telegram -----------------------------------------------------------------------------


def newest_id(telegram: FakeTelegram) -> int:
    return max((m.message_id for m in telegram.messages.values() if m.chat_id == CHAT), default=0)


async def shown_since(telegram: FakeTelegram, mark: int, text: str) -> Message:
    """The newest bot message in CHAT posted after message `mark` that shows `text`."""

    def found() -> Message | None:
        return next(
            (
                m
                for m in reversed(telegram.bot_messages(CHAT))
                if m.message_id > mark and text in m.text
            ),
            None,
        )

    await telegram.wait_for(found, WAIT)
    message = found()
    assert message is not None
    return message


def marked_taken(telegram: FakeTelegram, message: Message) -> Callable[[], bool]:
    """Whether the bot put 👀 on `message` (it may be 👍 by now: the run's end counts not)."""
    return lambda: any(
        str(c.params.get("message_id")) == str(message.message_id)
        and "👀" in str(c.params.get("reaction"))
        for c in telegram.calls_of("setMessageReaction")
    )


def button(message: Message, label: str) -> str:
    [data] = [d for text, d in message.buttons if label in text]
    return data


@DEPLOYMENTS
async def test_the_telegram_journey_is_the_same_in_every_deployment(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, roles: tuple[str, ...]
) -> None:
    script(fake_llm)
    async with FakeTelegram() as telegram:
        env = cli_env(tmp_path, agent_home, **telegram_env(telegram))
        async with deployment(tmp_path, env, roles, TELEGRAM):
            # A tool, then the answer; the status ends done.
            mark = newest_id(telegram)
            telegram.message(CHAT, "greet the world")
            await shown_since(telegram, mark, GREETED)
            tool = await shown_since(telegram, mark, "echo hello-from-bash")
            await shown_since(telegram, mark, "✅ done")
            assert "bash" in tool.text

            # A steer while the tool runs: marked as taken, and the model gets it.
            mark = newest_id(telegram)
            telegram.message(CHAT, "do it slowly")
            await shown_since(telegram, mark, "sleep 6")
            steer = telegram.message(CHAT, "STEER-PURPLE instead")
            await telegram.wait_for(marked_taken(telegram, steer), WAIT)
            await shown_since(telegram, mark, STEERED)
            await shown_since(telegram, mark, "✅ done")
            assert requests_with(fake_llm, "STEER-PURPLE") == 1
            assert telegram.find(UNSTEERED, CHAT) is None

            # A dangerous command asks first, and runs only once allowed.
            mark = newest_id(telegram)
            telegram.message(CHAT, "wipe the junk")
            question = await shown_since(telegram, mark, "Approve this")
            assert "rm -rf ./junk" in question.text
            await anyio.sleep(1)  # room for a command that did not wait to run
            assert not [r for r in tool_results(fake_llm) if RAN in r]
            telegram.press(CHAT, question.message_id, button(question, "Allow once"))
            await shown_since(telegram, mark, WIPED)
            assert [r for r in tool_results(fake_llm) if RAN in r]

            # /stop ends a running tool.
            mark = newest_id(telegram)
            telegram.message(CHAT, "start the long job")
            await shown_since(telegram, mark, "sleep 30")
            telegram.message(CHAT, "/stop")
            await shown_since(telegram, mark, "stopped")
    assert telegram.find(NOT_REACHED, CHAT) is None


# --- Slack --------------------------------------------------------------------------------


def slack_shown(slack: FakeSlack, root: str, seen: set[str], text: str) -> Posted | None:
    """The newest message of the thread `root` not in `seen` that shows `text`."""
    return next(
        (
            m
            for m in reversed(list(slack.messages.values()))
            if m.ts not in seen and not m.deleted and m.thread_ts == root and text in m.visible
        ),
        None,
    )


async def slack_until(slack: FakeSlack, root: str, seen: set[str], text: str) -> Posted:
    await slack.wait_until(lambda: slack_shown(slack, root, seen, text) is not None, WAIT)
    found = slack_shown(slack, root, seen, text)
    assert found is not None
    return found


def action_id(message: Posted, label: str) -> str:
    return next(
        str(e["action_id"])
        for b in message.blocks
        for e in b.get("elements", [])
        if label in e.get("text", {}).get("text", "")
    )


def has_button(slack: FakeSlack, root: str, seen: set[str], label: str) -> Posted | None:
    for message in reversed(list(slack.messages.values())):
        if message.ts in seen or message.thread_ts != root or message.deleted:
            continue
        with contextlib.suppress(StopIteration):
            action_id(message, label)
            return message
    return None


def eyes_on(slack: FakeSlack, ts: str) -> bool:
    return any(
        c.args.get("timestamp") == ts and c.args.get("name") == "eyes"
        for c in slack.called("reactions.add")
    )


@DEPLOYMENTS
async def test_the_slack_journey_is_the_same_in_every_deployment(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, roles: tuple[str, ...]
) -> None:
    script(fake_llm)
    async with FakeSlack() as slack:
        env = cli_env(
            tmp_path,
            agent_home,
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_APP_TOKEN=slack.app_token,
            SLACK_API_BASE_URL=slack.base_url,
            SLACK_ALLOWED_USERS=ALICE,
        )
        async with deployment(tmp_path, env, roles):
            await slack.connected()
            # A tool, then the answer, streamed natively; the status ends done.
            seen = set(slack.messages)
            root = str((await slack.mention("greet the world"))["payload"]["event"]["ts"])
            answer = await slack_until(slack, root, seen, GREETED)
            await slack_until(slack, root, seen, "✅ done")
            await slack.wait_for("chat.startStream", lambda c: c.args.get("thread_ts") == root, 1)
            assert answer.stream is not None, "the answer did not stream"
            cards = [t.title for t in answer.stream.tasks.values() if t.status == "complete"]
            assert any("echo hello-from-bash" in c for c in cards), cards

            # A steer while the tool runs: marked as taken, and the model gets it.
            seen = set(slack.messages)
            await slack.thread_message("do it slowly", root)
            await slack_until(slack, root, seen, "sleep 6")
            steer = str(
                (await slack.thread_message("STEER-PURPLE instead", root))["payload"]["event"]["ts"]
            )
            await slack.wait_until(lambda: eyes_on(slack, steer), WAIT)
            await slack_until(slack, root, seen, STEERED)
            await slack_until(slack, root, seen, "✅ done")
            assert requests_with(fake_llm, "STEER-PURPLE") == 1
            assert slack_shown(slack, root, set(), UNSTEERED) is None

            # A dangerous command asks first, and runs only once allowed.
            seen = set(slack.messages)
            await slack.thread_message("wipe the junk", root)
            question = await slack_until(slack, root, seen, "Approve this")
            assert "rm -rf ./junk" in question.visible
            await anyio.sleep(1)  # room for a command that did not wait to run
            assert not [r for r in tool_results(fake_llm) if RAN in r]
            await slack.acked(await slack.press(question.ts, action_id(question, "Allow once")))
            await slack_until(slack, root, seen, WIPED)
            assert [r for r in tool_results(fake_llm) if RAN in r]

            # The Stop button ends a running tool.
            seen = set(slack.messages)
            await slack.thread_message("start the long job", root)
            await slack_until(slack, root, seen, "sleep 30")
            await slack.wait_until(lambda: has_button(slack, root, seen, "Stop") is not None, WAIT)
            status = has_button(slack, root, seen, "Stop")
            assert status is not None
            await slack.acked(await slack.press(status.ts, action_id(status, "Stop")))
            await slack_until(slack, root, seen, "stopped")
    assert slack_shown(slack, root, set(), NOT_REACHED) is None

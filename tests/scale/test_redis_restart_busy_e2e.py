"""A message to a busy conversation right after a Redis restart reaches its agent once.

A frontend and two workers on a real redis-server (its data kept, append-only file),
the fake Telegram (long polled), real agents on the fake LLM, eight warm chats.
redis-server stops while two of them run a tool that outlasts the outage and two a
tool that ends during it, and four others are sent a message that waits at Telegram
meanwhile; it stays down `DOWN` seconds and starts again with its data, and at once
each chat is sent one more message. Each must reach its agent exactly once (one model
request has it as its newest message, and no context holds it twice), be marked, and
its answer show in the chat.

The four that were sent a message meanwhile are the case that lost messages: the
frontend hands in what waited and the new message one right behind the other, the
first's run is short, and the second, steered into it as it ended, stayed in pi
0.73.1's queue for a prompt that never came (no answer, the model never saw it).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, role_env, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.journeys import requests_with
from tests.support.loopback import until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(300),
]

# Each chat is busy when the message comes right after the restart:
LONG = (4001, 4002)  # running a tool that outlasts the outage
ENDED = (4003, 4004)  # its tool ended while Redis was down
DOWN_SENT = (4005, 4006, 4007, 4008)  # answering a message sent to it while Redis was down
CHATS = LONG + ENDED + DOWN_SENT
DOWN = 3.0  # s redis-server is down
# Still running when Redis is back and the messages arrive (it started before Redis
# stopped), so each message meets a busy agent.
TOOL = "sleep 9; echo slept"
SHORT_TOOL = "sleep 2; echo slept"
CONFIG = """\
[telegram]
poll_timeout = 1
[limits]
max_agents = 20
max_per_user = 20
drain_timeout = 5
[worker]
name = "{name}"
"""


def answered(telegram: FakeTelegram, chat: int) -> bool:
    return telegram.find(f"Reply to AFTER-{chat}.", chat) is not None


def in_context(llm: FakeLLM, chat: int) -> int:
    """The most times one request to the model held the chat's message sent after the
    restart (one user message each)."""
    token = f"AFTER-{chat}"
    return max(
        (sum(token in str(m.get("content")) for m in r.messages if m.get("role") == "user"))
        for r in llm.requests
    )


def marked_taken(telegram: FakeTelegram, message: Message) -> bool:
    """Whether the bot put 👀 (taken) or 👍 (done) on `message`."""
    return any(
        str(c.params.get("message_id")) == str(message.message_id)
        and ("👀" in str(c.params.get("reaction")) or "👍" in str(c.params.get("reaction")))
        for c in telegram.calls_of("setMessageReaction")
    )


async def test_a_message_to_a_busy_chat_right_after_a_redis_restart_reaches_the_agent_once(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    for chat in CHATS:
        fake_llm.add(f"HELLO-{chat}", Reply(text=f"Hello {chat}."))
        command = TOOL if chat in LONG else SHORT_TOOL
        fake_llm.add(
            f"JOB-{chat}",
            Reply(tool_calls=[ToolCall("bash", {"command": command})]),
            Reply(text=f"Job {chat} done."),
        )
        fake_llm.add(f"MEANWHILE-{chat}", Reply(text=f"Reply to MEANWHILE-{chat}."))
        fake_llm.add(f"AFTER-{chat}", Reply(text=f"Reply to AFTER-{chat}."))
    with RedisServer(tmp_path / "redis", persist=True) as redis:
        async with FakeTelegram() as telegram:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=",".join(str(c) for c in CHATS),
                PI_BRIDGE_LOG_LEVEL="DEBUG",
            )
            sent: dict[int, Message] = {}
            try:
                async with contextlib.AsyncExitStack() as stack:
                    processes = [
                        await stack.enter_async_context(
                            bridge_process(
                                tmp_path,
                                role_env(tmp_path, env, name, CONFIG.format(name=name)),
                                f"{name}.log",
                            )
                        )
                        for name in ("f1", "w1", "w2")
                    ]

                    def user(chat: int) -> dict[str, object]:
                        return {"id": chat, "is_bot": False, "first_name": "U"}

                    for chat in CHATS:
                        telegram.message(chat, f"HELLO-{chat}", user=user(chat))
                    await until(
                        lambda: all(telegram.find(f"Hello {c}.", c) for c in CHATS), 2 * WAIT
                    )
                    for chat in LONG + ENDED:
                        telegram.message(chat, f"JOB-{chat} please", user=user(chat))
                    # Every tool runs (its command shows) before Redis stops.
                    await until(lambda: all(telegram.find("sleep ", c) for c in LONG + ENDED), WAIT)
                    await anyio.to_thread.run_sync(redis.stop)
                    for chat in DOWN_SENT:
                        telegram.message(chat, f"MEANWHILE-{chat} hi", user=user(chat))
                    await anyio.sleep(DOWN)
                    await anyio.to_thread.run_sync(redis.start_again)
                    for chat in CHATS:
                        sent[chat] = telegram.message(chat, f"AFTER-{chat} now", user=user(chat))
                    with contextlib.suppress(TimeoutError):  # the assertions say which
                        await until(lambda: all(answered(telegram, c) for c in CHATS), WAIT)
                    # Each reached the model exactly once: in one request as its newest
                    # message, and never twice in one context (a steer and a prompt both).
                    seen = {
                        c: (requests_with(fake_llm, f"AFTER-{c}"), in_context(fake_llm, c))
                        for c in CHATS
                    }
                    assert seen == dict.fromkeys(CHATS, (1, 1)), "(requests, times in one context)"
                    assert [c for c in CHATS if not answered(telegram, c)] == []
                    assert [c for c in CHATS if not marked_taken(telegram, sent[c])] == []
                    for process in reversed(processes):
                        assert await stop(process) == 0
            finally:
                kill_agents(tmp_path / "data")

"""A Redis restart under a scale-out, as processes: a frontend and two workers on a
real redis-server (its data kept, append-only file), the fake Telegram (long polled)
and the fake Slack (Socket Mode), real agents on the fake LLM.

Eight conversations are warm (each answered once). Then four of them run a tool,
redis-server stops while the tools run, stays down `DOWN` seconds (messages sent to
two Telegram chats meanwhile wait at Telegram), and starts again with its data; the
four others are written to at once (those two still answering what waited). Every
conversation's chat must move again within `RESUMED_WITHIN` of Redis being back, and
every message be answered (issue 34: three of eight stalled ~30 s).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, CHANNEL, TEAM, FakeSlack
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.loopback import until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(300),
]

CHATS = (3001, 3002, 3003, 3004, 3005, 3006)
THREADS = 2
DOWN = 3.0  # s redis-server is down
TOOL = "sleep 3; echo slept"  # running when Redis stops, ending while it is down
# The bound docs/operations.md states: from Redis back to each conversation's chat
# moving again (0.3-1.5 s measured); and to each Telegram answer (2-3.6 s measured:
# the agent's turn besides, given room on a loaded machine). Before the fix, two of
# eight conversations stalled 33-35 s.
RESUMED_WITHIN = 5.0
ANSWERED_WITHIN = 10.0
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


@dataclass
class Chat:
    platform: str
    chat_id: int = 0
    root: str = ""

    @property
    def key(self) -> str:
        return (
            f"tg:{self.chat_id}"
            if self.platform == "telegram"
            else f"slack:{TEAM}:{CHANNEL}:{self.root}"
        )


class Scenario:
    def __init__(self, fake_llm: FakeLLM, telegram: FakeTelegram, slack: FakeSlack) -> None:
        self.fake_llm, self.telegram, self.slack = fake_llm, telegram, slack
        self.sent: list[tuple[str, Chat]] = []
        self.at: dict[str, float] = {}
        self.threads: dict[str, str] = {}  # a person's Slack message → its thread
        self.answered: dict[str, float] = {}

    async def send(self, chat: Chat, text: str, tool: bool = False) -> str:
        token = f"msg-{len(self.sent) + 1:03d}"
        answer = Reply(text=f"Reply to {token}.")
        if tool:
            self.fake_llm.add(
                token, Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]), answer
            )
        else:
            self.fake_llm.add(token, answer)
        self.sent.append((token, chat))
        self.at[token] = time.monotonic()
        if chat.platform == "telegram":
            user = {"id": chat.chat_id, "is_bot": False, "first_name": "U"}
            self.telegram.message(chat.chat_id, f"{token} {text}", user=user)
        else:
            if chat.root:
                envelope = await self.slack.thread_message(f"{token} {text}", chat.root)
            else:
                envelope = await self.slack.mention(f"{token} {text}")
            ts = str(envelope["payload"]["event"]["ts"])
            chat.root = chat.root or ts
            self.threads[ts] = chat.root
        return token

    def touched(self, chat: Chat) -> list[float]:
        """When the platform was called for the conversation (its messages, reactions)."""
        if chat.platform == "telegram":
            wanted = str(chat.chat_id)
            return [c.at for c in self.telegram.calls if str(c.params.get("chat_id")) == wanted]
        return [c.at for c in self.slack.calls if self._thread_of(c.args) == chat.root]

    def _thread_of(self, args: dict[str, object]) -> str | None:
        if args.get("thread_ts"):
            return str(args["thread_ts"])
        ts = str(args.get("ts") or args.get("timestamp") or "")
        if ts in self.threads:
            return self.threads[ts]
        message = self.slack.messages.get(ts)
        return (message.thread_ts or ts) if message is not None else None

    def shown(self, token: str, chat: Chat) -> bool:
        wanted = f"Reply to {token}."
        if chat.platform == "telegram":
            return self.telegram.find(wanted, chat.chat_id) is not None
        return any(
            wanted in m.visible and m.thread_ts == chat.root and not m.deleted
            for m in self.slack.messages.values()
        )

    async def watch(self) -> None:
        while True:
            for token, chat in self.sent:
                if token not in self.answered and self.shown(token, chat):
                    self.answered[token] = time.monotonic()
            await anyio.sleep(0.05)

    async def all_answered(self, tokens: list[str], within: float) -> None:
        try:
            await until(lambda: all(t in self.answered for t in tokens), within)
        except TimeoutError:
            late = [t for t in tokens if t not in self.answered]
            raise AssertionError(f"not answered in {within} s: {late}") from None


async def test_every_conversation_goes_on_within_seconds_of_a_redis_restart(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    chats = [Chat("telegram", chat_id=c) for c in CHATS] + [Chat("slack") for _ in range(THREADS)]
    with RedisServer(tmp_path / "redis", persist=True) as redis:
        async with FakeTelegram() as telegram, FakeSlack() as slack:
            base = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=",".join(str(c) for c in CHATS),
                SLACK_BOT_TOKEN=slack.bot_token,
                SLACK_APP_TOKEN=slack.app_token,
                SLACK_API_BASE_URL=slack.base_url,
                SLACK_ALLOWED_USERS=ALICE,
            )
            run = Scenario(fake_llm, telegram, slack)
            timings: dict[str, float] = {}
            try:
                async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as tg:
                    processes = []
                    for name, role in (("f1", "frontend"), ("w1", "worker"), ("w2", "worker")):
                        config = tmp_path / f"{name}.toml"
                        config.write_text(CONFIG.format(name=name), encoding="utf-8")
                        env = base | {"PI_BRIDGE_CONFIG": str(config), "PI_BRIDGE_ROLE": role}
                        processes.append(
                            await stack.enter_async_context(
                                bridge_process(tmp_path, env, f"{name}.log")
                            )
                        )
                    tg.start_soon(run.watch)
                    await slack.connected(WAIT)  # three processes starting on a loaded machine
                    await until(
                        lambda: all(
                            "serving" in (tmp_path / f"{w}.log").read_text(errors="replace")
                            for w in ("w1", "w2")
                            if (tmp_path / f"{w}.log").exists()
                        ),
                        WAIT,
                    )
                    warm = [await run.send(c, "hello") for c in chats]
                    await run.all_answered(warm, 2 * WAIT)
                    # Half run a tool across the outage, the rest are written to after it.
                    busy, idle = chats[::2], chats[1::2]
                    running = [await run.send(c, "a job", tool=True) for c in busy]
                    await until(lambda: set(running) <= {r.rule for r in fake_llm.requests}, WAIT)
                    await anyio.to_thread.run_sync(redis.stop)
                    down = time.monotonic()
                    tg_idle = [c for c in idle if c.platform == "telegram"]
                    waiting = [await run.send(c, "while down") for c in tg_idle[:2]]
                    await anyio.sleep(DOWN)
                    await anyio.to_thread.run_sync(redis.start_again)
                    back = time.monotonic()
                    timings["down"] = round(back - down, 1)
                    # Those still answering what they were sent meanwhile included: their
                    # two messages come one right behind the other, and the second once
                    # steered a run that had just ended, into the agent's queue for good.
                    after = [await run.send(c, "after") for c in idle]
                    tokens = running + waiting + after
                    await run.all_answered(tokens, RESUMED_WITHIN + WAIT)
                    took = {t: round(run.answered[t] - back, 1) for t in tokens}
                    timings |= took
                    resumed = {
                        c.key: round(min(t for t in run.touched(c) if t > back) - back, 1)
                        for c in chats
                    }
                    timings |= resumed
                    for process in reversed(processes):
                        assert await stop(process) == 0
                    tg.cancel_scope.cancel()
            finally:
                kill_agents(tmp_path / "data")
                print(f"timings (s after Redis was back): {timings}")
                print({t: round(a - run.at[t], 1) for t, a in run.answered.items()})
    # Each conversation's chat moves again (a status, an answer, a reaction) within the
    # bound, and each Telegram answer is there soon after. A Slack answer takes longer
    # whatever Redis does: its calls keep the channel's pace of one a second.
    assert {k: s for k, s in resumed.items() if s > RESUMED_WITHIN} == {}, timings
    telegram_tokens = [t for t, c in run.sent if t in tokens and c.platform == "telegram"]
    assert {t: took[t] for t in telegram_tokens if took[t] > ANSWERED_WITHIN} == {}, timings

"""The scale-out's failover, end to end: 2 frontends and 3 workers as processes on a
real redis-server, the fake Telegram and the fake Slack, real agents on the fake LLM.

Slack runs in HTTP mode: the fake Slack keeps one Socket Mode connection only (the
newest), so each frontend serves the Events API on its own port (SLACK_HTTP_PORT,
signed with SLACK_SIGNING_SECRET) and the test posts each event to the frontends in
turn, as a load balancer would, skipping one that does not answer. Telegram is long
polled by whichever frontend holds the polling lease.

20 conversations (14 Telegram private chats, 6 Slack threads) are spread over the
workers (each owns at least one, by the leases in Redis). Then, in turn:

- a worker is killed (SIGKILL) while its conversations run an 8-second tool: within
  30 s their leases are other workers', each run ends answered or marked
  interrupted, and a follow-up is answered with the first turn in the model's
  request (the session went on, on another worker). With `on_stop = "detach"` (the
  default outside tests) a surviving worker may take the running agent back from
  its host; either outcome is accepted;
- the frontend that polls Telegram is killed: the other one polls within the
  lease's life and a few seconds, and the messages sent meanwhile are answered;
- redis-server restarts (its data kept, append-only file): messages sent after are
  answered.

A ledger gives every message the test sends a token ("msg-007"); the fake model
answers each with "Reply to <token>.". At the end every token is answered exactly
once in its own chat, or its chat shows a run was interrupted.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
import anyio
import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, CHANNEL, TEAM, FakeSlack
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.loopback import free_port, until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from anyio.abc import Process

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
    pytest.mark.timeout(360),
]

TG_CHATS = tuple(range(1001, 1015))  # private chats, each its own user's
SLACK_THREADS = 6
WORKERS = ("w1", "w2", "w3")
LEASE_TTL = 5
PREFIX = "pi-bridge:scale:"
LONG_TOOL = "sleep 8; echo slept"
MOVED_WITHIN = 30.0  # a dead worker's conversations are other workers' by then
ON_STOP = "detach"  # the default: a surviving worker may take a dead one's agent back
COLD_STARTS = 7  # agents started at once in the spread phase
MID_TOOL = "sleep 4; echo done-sleeping"  # running while redis-server restarts
CONFIG = f"""\
[telegram]
poll_timeout = 1
[slack]
http_host = "127.0.0.1"
[agents]
on_stop = "{ON_STOP}"
[limits]
max_agents = 20
max_per_user = 20
drain_timeout = 5
[worker]
lease_ttl = {LEASE_TTL}
"""


@dataclass
class Conversation:
    index: int
    platform: str  # "telegram" | "slack"
    chat_id: int = 0  # Telegram
    root: str = ""  # Slack: the thread's root ts, once started

    @property
    def key(self) -> str:
        if self.platform == "telegram":
            return f"tg:{self.chat_id}"
        return f"slack:{TEAM}:{CHANNEL}:{self.root}"

    @property
    def fact(self) -> str:
        return f"fact{self.index:02d}word"  # what the first turn says, to find later


@dataclass
class Sent:
    token: str
    conversation: Conversation
    phase: str
    at: float = field(default_factory=time.monotonic)


def reply_text(token: str) -> str:
    return f"Reply to {token}."


class Ledger:
    """Every message the test sent, and what its chat shows of it."""

    def __init__(self, telegram: FakeTelegram, slack: FakeSlack) -> None:
        self.telegram, self.slack = telegram, slack
        self.sent: list[Sent] = []
        self.took: dict[str, float] = {}
        self.asked: dict[str, int] = {}  # token → the model's requests for it

    def token(self) -> str:
        return f"msg-{len(self.sent) + 1:03d}"

    def shown(self, conversation: Conversation) -> list[str]:
        """The texts the bot shows in the conversation's chat now."""
        if conversation.platform == "telegram":
            return [m.text for m in self.telegram.bot_messages(conversation.chat_id)]
        return [
            m.visible
            for m in self.slack.messages.values()
            if not m.deleted and m.thread_ts == conversation.root
        ]

    def answers(self, sent: Sent) -> int:
        return sum(reply_text(sent.token) in text for text in self.shown(sent.conversation))

    def interrupted(self, conversation: Conversation) -> bool:
        return any(
            "interrupted" in text or "not delivered" in text for text in self.shown(conversation)
        )

    def settled(self, sent: Sent) -> bool:
        return self.answers(sent) > 0 or self.interrupted(sent.conversation)

    def note(self) -> None:
        """When each message was first answered (s after it was sent)."""
        for s in self.sent:
            if s.token not in self.took and self.answers(s):
                self.took[s.token] = round(time.monotonic() - s.at, 1)

    def report(self) -> str:
        lines = ["ledger (token, phase, conversation, answers, interrupted, answered after s):"]
        for s in self.sent:
            c = s.conversation
            lines.append(
                f"  {s.token} {s.phase:<9} {c.key:<40} answers={self.answers(s)} "
                f"interrupted={self.interrupted(c)} after={self.took.get(s.token)} "
                f"asked={self.asked.get(s.token, 0)}"
            )
            if not self.answers(s):
                lines.append(f"    the chat shows: {[t[:120] for t in self.shown(c)]}")
        return "\n".join(lines)


class SlackBalancer:
    """Posts each Slack delivery to the live frontends in turn, as a load balancer
    would; one that does not take it (down, no answer in time) is skipped."""

    def __init__(self, slack: FakeSlack, ports: list[int]) -> None:
        self.slack = slack
        self.urls = [f"http://127.0.0.1:{port}/slack/events" for port in ports]
        self.down: set[int] = set()
        self._turn = 0

    async def deliver(self, event: dict[str, Any]) -> dict[str, Any]:
        payload = self.slack.event_callback(event)
        for attempt in range(2 * len(self.urls)):
            live = [i for i in range(len(self.urls)) if i not in self.down]
            index = live[self._turn % len(live)]
            self._turn += 1
            self.slack.events_url = self.urls[index]
            try:
                envelope = await self.slack.send_envelope("events_api", payload, attempt)
            except aiohttp.ClientError:
                continue
            if self.slack.answers.get(envelope["envelope_id"]) == 200:
                return envelope
        raise AssertionError("no frontend took a Slack delivery")


async def watch(
    url: str, conversations: list[Conversation], seen: dict[str, list[str]], ledger: Ledger
) -> None:
    """Every holder each conversation's lease had (worker names, in order), and when
    each message was answered."""
    client = aioredis.from_url(url, decode_responses=True)
    try:
        while True:
            with contextlib.suppress(RedisError, OSError):
                keys = [c.key for c in conversations if c.platform == "telegram" or c.root]
                values = await client.mget([f"{PREFIX}lease:{k}" for k in keys]) if keys else []
                for key, value in zip(keys, values, strict=True):
                    if value:
                        name = str(value).split("/", 1)[0]
                        if not seen.setdefault(key, []) or seen[key][-1] != name:
                            seen[key].append(name)
            ledger.note()
            await anyio.sleep(0.2)
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()


async def holder_of(url: str, name: str) -> str:
    client = aioredis.from_url(url, decode_responses=True)
    try:
        value = await client.get(f"{PREFIX}lease:{name}")
        return str(value or "")
    finally:
        await client.aclose()


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def log_of(tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.log"
    return path.read_text(errors="replace") if path.exists() else ""


@contextlib.asynccontextmanager
async def watching(
    url: str, conversations: list[Conversation], seen: dict[str, list[str]], ledger: Ledger
) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, url, conversations, seen, ledger)
        yield
        tg.cancel_scope.cancel()


@dataclass
class Failover:
    """The scenario's processes, platforms and ledger, and its phases in turn."""

    tmp_path: Path
    fake_llm: FakeLLM
    redis: RedisServer
    telegram: FakeTelegram
    slack: FakeSlack
    ledger: Ledger
    balancer: SlackBalancer
    base: dict[str, str]  # the environment every process shares
    slack_ports: list[int]
    conversations: list[Conversation]
    owners: dict[str, list[str]] = field(default_factory=dict)  # key → lease holders seen
    timings: dict[str, float] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def env_of(self, name: str, role: str, **more: str) -> dict[str, str]:
        config = self.tmp_path / f"{name}.toml"
        extra = f'name = "{name}"\n' if role == "worker" else ""
        config.write_text(CONFIG + extra, encoding="utf-8")
        return self.base | {"PI_BRIDGE_CONFIG": str(config), "PI_BRIDGE_ROLE": role} | more

    async def send(self, conversation: Conversation, phase: str, text: str = "") -> Sent:
        sent = Sent(self.ledger.token(), conversation, phase)
        self.ledger.sent.append(sent)
        words = f"{sent.token} {text}".strip()
        if conversation.platform == "telegram":
            user = {"id": conversation.chat_id, "is_bot": False, "first_name": "U"}
            self.telegram.message(conversation.chat_id, words, user=user)
        else:
            event = self.slack.mention_event(words, thread_ts=conversation.root or None)
            await self.balancer.deliver(event)
            conversation.root = conversation.root or event["ts"]
        return sent

    def plain(self, sent: Sent) -> Sent:
        self.fake_llm.add(sent.token, Reply(text=reply_text(sent.token)))
        return sent

    def running(self, sent: Sent, command: str) -> Sent:
        """`sent` runs `command` in bash, then is answered."""
        tool = Reply(tool_calls=[ToolCall("bash", {"command": command})])
        self.fake_llm.add(sent.token, tool, Reply(text=reply_text(sent.token)))
        return sent

    async def asked(self, sents: list[Sent]) -> None:
        """Until the model was asked about each of `sents`."""
        tokens = {s.token for s in sents}
        await until(lambda: tokens <= {r.rule for r in self.fake_llm.requests if r.rule}, WAIT)

    async def answered(self, sents: list[Sent], within: float = WAIT) -> None:
        try:
            await until(lambda: all(self.ledger.answers(s) for s in sents), within)
        except TimeoutError:
            late = [s.token for s in sents if not self.ledger.answers(s)]
            raise AssertionError(f"not answered in {within} s: {late}") from None

    def mark(self, phase: str) -> None:
        self.timings[phase] = round(time.monotonic() - self.started, 1)

    def log_of(self, name: str) -> str:
        return log_of(self.tmp_path, name)

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        """Two frontends and the workers, serving; the lease holders watched."""
        for name in ("f1", "f2"):
            port = str(self.slack_ports[int(name[1]) - 1])
            env = self.env_of(name, "frontend", SLACK_HTTP_PORT=port)
            self.processes[name] = await stack.enter_async_context(
                bridge_process(self.tmp_path, env, f"{name}.log")
            )
        for name in WORKERS:
            self.processes[name] = await stack.enter_async_context(
                bridge_process(self.tmp_path, self.env_of(name, "worker"), f"{name}.log")
            )
        await stack.enter_async_context(
            watching(self.redis.url, self.conversations, self.owners, self.ledger)
        )
        await until(lambda: all(accepts(p) for p in self.slack_ports), WAIT)
        await until(lambda: all("serving" in self.log_of(w) for w in WORKERS), WAIT)
        # Each worker's claims loop reads by then (the first burst would
        # otherwise all go to whichever worker reads first).
        await anyio.sleep(2)
        self.mark("up")

    async def spread(self) -> None:
        """1. Twenty conversations, spread over the workers. In waves: twenty agents
        starting cold at once on a loaded 2-CPU machine (CI) can pass the bridge's
        30 s start-up limit, which is not what this test is about."""
        for start in range(0, len(self.conversations), COLD_STARTS):
            wave = []
            for conversation in self.conversations[start : start + COLD_STARTS]:
                text = f"first turn: remember {conversation.fact}"
                wave.append(self.plain(await self.send(conversation, "spread", text)))
                await anyio.sleep(0.1)
            await self.answered(wave, 2 * WAIT)
        self.mark("spread")
        for worker in WORKERS:
            held = [k for k, names in self.owners.items() if worker in names]
            assert held, f"{worker} owned no conversation: {self.owners}"

    async def kill_a_worker(self) -> list[Conversation]:
        """2. A worker dies while its conversations run a tool; its conversations."""
        url = self.redis.url
        holders = {c.key: await holder_of(url, c.key) for c in self.conversations}
        counts = {w: sum(h.startswith(f"{w}/") for h in holders.values()) for w in WORKERS}
        victim = max(WORKERS, key=lambda w: counts[w])
        doomed = [c for c in self.conversations if holders[c.key].startswith(f"{victim}/")]
        assert doomed, f"no conversation is held now: {holders}"
        long_runs = [
            self.running(await self.send(c, "long", "run the long job"), LONG_TOOL) for c in doomed
        ]
        await self.asked(long_runs)
        await anyio.sleep(1)  # the tools are sleeping now
        self.processes[victim].kill()
        await self.processes[victim].wait()
        killed = time.monotonic()
        self.mark("worker killed")

        def moved() -> bool:
            return all(self.owners.get(c.key, [victim])[-1] != victim for c in doomed)

        try:
            await until(moved, MOVED_WITHIN)
        except TimeoutError:
            raise AssertionError(f"not taken over in time: {self.owners}") from None
        self.mark("taken over")
        await until(lambda: all(self.ledger.settled(s) for s in long_runs), WAIT)
        self.mark("long runs settled")
        follow_ups = [self.plain(await self.send(c, "follow-up", "and now?")) for c in doomed]
        await self.answered(follow_ups)
        self.mark("follow-ups answered")
        for sent in follow_ups:
            [request] = [r for r in self.fake_llm.requests if r.rule == sent.token]
            history = json.dumps(request.body)
            assert sent.conversation.fact in history, f"{sent.token}: history lost"
        assert time.monotonic() - killed < MOVED_WITHIN + WAIT
        return doomed

    async def kill_the_poller(self, doomed: list[Conversation]) -> None:
        """3. The frontend that polls Telegram dies."""
        pollers = [f for f in ("f1", "f2") if "polling Telegram" in self.log_of(f)]
        assert len(pollers) == 1, pollers
        [poller] = pollers
        other = "f2" if poller == "f1" else "f1"
        self.processes[poller].kill()
        await self.processes[poller].wait()
        self.balancer.down.add(int(poller[1]) - 1)
        lost_poller = time.monotonic()
        self.mark("frontend killed")
        alive = [c for c in self.conversations if c not in doomed]
        meanwhile = [
            self.plain(await self.send(c, "no-poller", "are you there?"))
            for c in alive[:6] + doomed[:1]
        ]
        threads = [c for c in self.conversations if c.platform == "slack"]
        meanwhile += [
            self.plain(await self.send(c, "no-poller", "and Slack?")) for c in threads[:2]
        ]
        await until(lambda: "polling Telegram" in self.log_of(other), LEASE_TTL + 10)
        self.timings["poll moved after"] = round(time.monotonic() - lost_poller, 1)
        await self.answered(meanwhile)
        self.mark("no-poller answered")

    async def restart_redis(self) -> None:
        """4. redis-server restarts while runs are in their tools."""
        mid = self.conversations[1::4]
        running = [
            self.running(await self.send(c, "redis-mid", "a job across the restart"), MID_TOOL)
            for c in mid
        ]
        await self.asked(running)
        await anyio.to_thread.run_sync(self.redis.restart)
        self.mark("redis restarted")
        # Not to the running ones: a message there would steer their runs.
        idle = [c for c in self.conversations if c not in mid]
        after = [self.plain(await self.send(c, "redis", "after the restart")) for c in idle[::3]]
        await self.answered(running + after)
        self.mark("after redis answered")

    async def stop_all(self) -> None:
        """Workers first, together (one stopping hands its idle conversations over;
        another must not take them then), then the frontend."""
        codes: dict[str, int] = {}

        async def stopped(name: str) -> None:
            codes[name] = await stop(self.processes[name])

        for group in (WORKERS, ("f1", "f2")):
            async with anyio.create_task_group() as tg:
                for name in group:
                    if self.processes[name].returncode is None:
                        tg.start_soon(stopped, name)
        assert all(code == 0 for code in codes.values()), codes
        self.mark("stopped")

    def report(self, ok: bool) -> None:
        print(f"timings (s since start): {self.timings}")
        print(f"lease holders seen: {self.owners}")
        for request in self.fake_llm.requests:
            if request.rule:
                self.ledger.asked[request.rule] = self.ledger.asked.get(request.rule, 0) + 1
        print(self.ledger.report())
        if not ok:
            for name in ("f1", "f2", *WORKERS):
                print(f"--- {name}.log (tail)\n{self.log_of(name)[-3000:]}")


async def test_conversations_survive_a_dead_worker_frontend_and_redis_restart(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    conversations = [Conversation(i, "telegram", chat_id=c) for i, c in enumerate(TG_CHATS)]
    conversations += [Conversation(len(TG_CHATS) + i, "slack") for i in range(SLACK_THREADS)]
    slack_ports = [free_port(), free_port()]
    ok = False
    with RedisServer(tmp_path / "redis", persist=True) as redis:
        async with FakeTelegram() as telegram, FakeSlack() as slack:
            ledger = Ledger(telegram, slack)
            base = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_ON_STOP=ON_STOP,
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=",".join(str(c) for c in TG_CHATS),
                SLACK_BOT_TOKEN=slack.bot_token,
                SLACK_SIGNING_SECRET=slack.signing_secret,
                SLACK_API_BASE_URL=slack.base_url,
                SLACK_ALLOWED_USERS=ALICE,
            )
            run = Failover(
                tmp_path,
                fake_llm,
                redis,
                telegram,
                slack,
                ledger,
                SlackBalancer(slack, slack_ports),
                base,
                slack_ports,
                conversations,
            )
            try:
                async with contextlib.AsyncExitStack() as stack:
                    await run.start(stack)
                    await run.spread()
                    doomed = await run.kill_a_worker()
                    await run.kill_the_poller(doomed)
                    await run.restart_redis()
                    await anyio.sleep(3)  # nothing more comes: no late doubles
                    await run.stop_all()
                ok = True
            finally:
                kill_agents(tmp_path / "data")
                run.report(ok)
    for sent in ledger.sent:
        answers = ledger.answers(sent)
        assert answers == 1 or (answers == 0 and ledger.interrupted(sent.conversation)), (
            f"{sent.token} answered {answers} time(s)\n{ledger.report()}"
        )
    # A final status is final: no late "working…" edit of a fenced-off owner, or of a
    # call its worker gave up on, may follow it (issue seen: 4 of 5 failed-over Slack
    # runs edited back to "working…" 2.5-22 s after "✅ done").
    assert reopened(slack, telegram) == [], reopened(slack, telegram)
    # Only a run cut by the dead worker may be left unanswered.
    unanswered = [s.token for s in ledger.sent if not ledger.answers(s)]
    assert set(unanswered) <= {s.token for s in ledger.sent if s.phase == "long"}, unanswered


# How a run ended. Not "⚠️ interrupted": the new owner marks a run it found cut off so,
# and a take-back's replay then goes on in that same message, as the run does.
FINAL = ("✅ done", "⏹ stopped", "⚠️ failed")


def reopened(slack: FakeSlack, telegram: FakeTelegram) -> list[str]:
    """Status messages edited back to "⏳ working…" after a final line."""
    edits: list[tuple[str, str]] = [
        (f"slack:{c.args.get('channel')}:{c.args.get('ts')}", str(c.args.get("text") or ""))
        for c in slack.called("chat.update")
    ]
    edits += [
        (f"tg:{c.params.get('chat_id')}:{c.params.get('message_id')}", str(c.params.get("text")))
        for c in telegram.calls_of("editMessageText")
        if c.ok
    ]
    finals: set[str] = set()
    found = []
    for message, text in edits:
        if any(text.startswith(f) for f in FINAL):
            finals.add(message)
        elif message in finals and "working" in text:
            history = [t[:40] for m, t in edits if m == message]
            found.append(f"{message}: {text[:80]} (its edits: {history})")
    return found

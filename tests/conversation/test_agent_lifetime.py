"""Conversations leave memory when idle, and one person holds at most a few agents.

A conversation's lasting state (owner, settings, session file) is in the store, so
one with no agent, nothing queued, no open question and no output pending is
forgotten after `idle_timeout` and made again from the store by its next message;
its outbox lane and slot map go with it. A press or a refused message never makes
a conversation. `max_per_user` caps the live agents of one owner's conversations:
their least recently active idle agent makes room, and when all are busy the
newcomer waits, told so. Time is injected (a monotonic clock the test moves on).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.model import ButtonPress, ChatRef, Inbound, Sender
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.bridge_harness import LIMITS, OWNER, STRANGER, WAIT, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import SUPPORT
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

STANDIN = SUPPORT / "export_standin.py"
IDLE = 60.0
MANY = 40


class JumpClock:
    """Monotonic seconds that a test can move forward at once (idle timeouts in no time)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def jump(self, seconds: float) -> None:
        self.offset += seconds


class Chats:
    """A bridge on a recording platform, spoken to in many conversations at once."""

    def __init__(self, bridge: Bridge, adapter: RecordingAdapter) -> None:
        self.bridge, self.adapter = bridge, adapter
        self._ids = iter(range(10**9))

    async def say(self, key: str, chat: ChatRef, text: str, sender: Sender = OWNER) -> None:
        n = next(self._ids)
        inbound = Inbound(key, chat, sender, f"m{n}", text=text, message_id=f"u{n}")
        await self.bridge.handle(inbound)

    async def press(self, key: str, chat: ChatRef, token: str, sender: Sender = OWNER) -> None:
        n = next(self._ids)
        press = ButtonPress(token, f"p{n}")
        await self.bridge.handle(Inbound(key, chat, sender, f"e{n}", press=press))

    async def until(self, predicate: Callable[[], bool], within: float = WAIT) -> None:
        with anyio.fail_after(within):
            while not predicate():  # noqa: ASYNC110 (polls the platform's state)
                await anyio.sleep(0.02)

    def shown(self, chat: ChatRef | str, text: str) -> bool:
        return any(text in t for t in self.adapter.texts(chat))


@contextlib.asynccontextmanager
async def chats(opts: BridgeOptions, clock: JumpClock) -> AsyncIterator[Chats]:
    adapter = RecordingAdapter(limits=LIMITS)
    store = await open_store("sqlite", opts.data_dir)
    try:
        async with Bridge(adapter, store, opts, clock=clock) as bridge:
            yield Chats(bridge, adapter)
    finally:
        await store.aclose()


def standin_options(tmp_path: Path, **kw: object) -> BridgeOptions:
    env = {"PATH": os.environ.get("PATH", os.defpath), "STANDIN_EXPORT_PATH": ""}
    return options(tmp_path / "data", [sys.executable, str(STANDIN)], env, **kw)


def dm(n: int) -> tuple[str, ChatRef]:
    return f"slack:T1:D{n}", ChatRef(f"D{n}")


async def test_idle_conversations_leave_memory_and_come_back_from_the_store(
    tmp_path: Path,
) -> None:
    clock = JumpClock()
    async with chats(standin_options(tmp_path, idle_timeout=IDLE), clock) as chat:
        supervisor, outbox = chat.bridge.supervisor, chat.bridge.outbox
        for n in range(MANY):
            await chat.say(*dm(n), "/verbose off")
        await chat.say(*dm(0), "/export")  # one of them starts an agent
        await chat.until(lambda: all(chat.shown(dm(n)[1], "shown: off") for n in range(MANY)))
        await chat.until(lambda: chat.shown(dm(0)[1], "not sent"))
        await outbox.flush()
        assert len(supervisor.conversations) == MANY
        assert list(supervisor.slots.live) == [dm(0)[0]]

        await supervisor.reap_idle()  # not idle for long enough yet: all stay
        assert len(supervisor.conversations) == MANY
        clock.jump(IDLE + 1)
        await supervisor.reap_idle()
        assert supervisor.conversations == {}
        assert supervisor.slots.live == {}
        assert (outbox.lanes_held, outbox.slot_maps_held) == (0, 0)
        assert len(await chat.bridge.store.list_conversations()) == MANY

        # Its next message finds the conversation as it was left: settings and all.
        await chat.say(*dm(7), "/status")
        await chat.until(lambda: chat.shown(dm(7)[1], "tools shown: off"))
        assert list(supervisor.conversations) == [dm(7)[0]]


async def test_presses_and_refused_messages_make_no_conversation(tmp_path: Path) -> None:
    clock = JumpClock()
    intruder = Sender("666", "eve")
    async with chats(standin_options(tmp_path), clock) as chat:
        supervisor, outbox, store = chat.bridge.supervisor, chat.bridge.outbox, chat.bridge.store
        for n in range(MANY):
            thread = ChatRef("C1", thread_id=f"17.{n}")
            await chat.press(f"slack:T1:C1:17.{n}", thread, f"forged-{n}")
            await chat.say(f"slack:T1:C2:18.{n}", ChatRef("C2", f"18.{n}"), "hi", intruder)
        await chat.until(lambda: len(chat.adapter.answers) == MANY)
        await chat.until(lambda: len(chat.adapter.texts("C2")) == MANY)
        await outbox.flush()
        assert all("no longer active" in text for _, text, _ in chat.adapter.answers)
        assert supervisor.conversations == {}
        assert await store.list_conversations() == []
        clock.jump(1.0)  # past the refusals' chat pacing
        await supervisor.reap_idle()
        assert (outbox.lanes_held, outbox.slot_maps_held) == (0, 0)


def key_of(name: str) -> tuple[str, ChatRef]:
    return f"tg:{name}", ChatRef(name)


@pytest.mark.agent
async def test_one_person_holds_at_most_max_per_user_agents(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    from tests.conftest import require_agent
    from tests.support.agents import DEFAULT_VERSION

    require_agent(DEFAULT_VERSION)
    fake_llm.add(
        "long job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 30; echo late"})]),
        Reply(text="Long job over."),
    )
    fake_llm.add("hello", Reply(text="Hello there."))
    argv = agent_home.argv(DEFAULT_VERSION)
    # B's run is still going at the end: the drain need not wait for it.
    opts = options(tmp_path / "data", argv, agent_home.env(), max_per_user=2, drain_timeout=0.5)
    async with chats(opts, JumpClock()) as chat:
        live = chat.bridge.supervisor.slots.live
        (a, chat_a), (b, chat_b), (c, chat_c), (d, chat_d) = map(key_of, "abcd")
        await chat.say(a, chat_a, "start the long job")
        await chat.say(b, chat_b, "start the long job")
        await chat.until(lambda: chat.shown(chat_a, "🔧 bash") and chat.shown(chat_b, "🔧 bash"))

        # A third conversation of the same person waits, and says why.
        await chat.say(c, chat_c, "hello from c")
        await chat.until(lambda: chat.shown(chat_c, "You have 2 agents working"))
        assert set(live) == {a, b}
        # Someone else is not held up by that person's agents.
        await chat.say(d, chat_d, "hello from d", STRANGER)
        await chat.until(lambda: chat.shown(chat_d, "Hello there."))

        # One of the two runs ends: its now idle agent makes room for the third.
        await chat.say(a, chat_a, "/stop")
        await chat.until(lambda: chat.shown(chat_c, "Hello there."))
        assert set(live) == {b, c, d}


async def test_an_agent_that_dies_as_it_starts_is_told_in_the_chat(tmp_path: Path) -> None:
    # A conversation's first message waits for its agent to start; an agent that died
    # then (before its event pump, which reports crashes, ran) left the chat without a
    # word: no status, no answer (bwrap failing at its start did so now and then).
    crash = "import sys; sys.stderr.write('boom: no config\\n'); sys.exit(3)"
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    opts = options(tmp_path / "data", [sys.executable, "-c", crash], env)
    async with running_bridge(opts) as harness:
        await harness.say("hello")
        told = await harness.shown("boom: no config")
    assert "stopped as it started" in told
    assert "exit 3" in told or "code 3" in told

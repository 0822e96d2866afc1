"""One conversation built of real parts, for the tests of those parts.

`room()` makes what a bridge gives a conversation (`Services`: a recording platform,
the real outbox, the real sqlite store in a temporary dir, the live-agent caps) and
a `Conversation` running on it, with no supervisor and no admission in front: a test
hands it inbounds as the supervisor would (`say`, `press`: read once, then
delivered) and looks at what the chat shows and what the store holds. Its agent,
started when a message needs one, is the scripted stand-in (standin_pi.py),
sandboxed as a real agent is; `got()` is what the agent was sent.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.conversation.agent_slots import AgentSlots
from bridge.conversation.core import Conversation
from bridge.conversation.routing import read
from bridge.conversation.shared import Services
from bridge.model import ButtonPress, Inbound, Sender
from bridge.outbox import Outbox
from bridge.service import new_token
from bridge.store import open_store
from tests.support.bridge_harness import CHAT, KEY, LIMITS, OWNER, options
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from bridge.model import Button
    from bridge.options import BridgeOptions
    from bridge.store import Store
    from tests.support.recording_adapter import FakeMessage

STANDIN = Path(__file__).with_name("standin_pi.py")
END = "END"  # a steer that makes the stand-in end its run (standin_pi.py)
WAIT = 60.0  # generous: real agents start slowly on a busy two-core CI machine


@dataclass
class Room:
    conversation: Conversation
    services: Services
    adapter: RecordingAdapter
    store: Store
    options: BridgeOptions
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def say(self, text: str, sender: Sender = OWNER, reply_to: str | None = None) -> str:
        """A message in the chat, delivered as the supervisor delivers it; its id."""
        n = next(self._ids)
        inbound = Inbound(
            KEY, CHAT, sender, f"e{n}", text=text, reply_to=reply_to, message_id=f"u{n}"
        )
        self.deliver(inbound)
        return f"u{n}"

    async def press(self, label: str, sender: Sender = OWNER, contains: str = "") -> str:
        """A press on the newest live button `label` (on a message containing
        `contains`); the press's id, which its answer carries."""
        button = await self.button(label, contains)
        return self.press_token(button.token, sender)

    def press_token(self, token: str, sender: Sender = OWNER, text: str | None = None) -> str:
        n = next(self._ids)
        press = ButtonPress(token, f"p{n}", text=text)
        self.deliver(Inbound(KEY, CHAT, sender, f"e{n}", press=press))
        return f"p{n}"

    def deliver(self, inbound: Inbound) -> None:
        services = self.services
        self.conversation.deliver(read(inbound, services.prefixes, services.bot_name))

    async def button(self, label: str, contains: str = "") -> Button:
        await self.until(lambda: self._button(label, contains) is not None)
        found = self._button(label, contains)
        assert found is not None
        return found

    def _button(self, label: str, contains: str) -> Button | None:
        for message in reversed(self.adapter.live(CHAT)):
            if contains not in message.text:
                continue
            for row in message.buttons:
                for button in row:
                    if button.label == label or button.label.endswith(label):
                        return button
        return None

    def find(self, text: str) -> FakeMessage | None:
        """The newest live message containing `text`."""
        return next((m for m in reversed(self.adapter.live(CHAT)) if text in m.text), None)

    async def shown(self, text: str) -> FakeMessage:
        await self.until(lambda: self.find(text) is not None)
        found = self.find(text)
        assert found is not None
        return found

    def answered(self, press_id: str) -> str | None:
        """How the platform answered a press (the text of its toast), if it has."""
        return next((text for p, text, _ in self.adapter.answers if p == press_id), None)

    async def answer_of(self, press_id: str) -> str:
        await self.until(lambda: self.answered(press_id) is not None)
        answer = self.answered(press_id)
        assert answer is not None
        return answer

    def got(self, kind: str) -> list[dict[str, object]]:
        """The commands of `kind` the agent was sent, in order."""
        log = self.options.workspace(KEY) / "standin.log"
        lines = log.read_text().splitlines() if log.exists() else []
        commands = [json.loads(line) for line in lines if line.startswith("{")]
        return [c for c in commands if _kind(c) == kind]

    async def working(self) -> None:
        """A run on: the stand-in's lasts until `end_run`."""
        self.say("start a long task")
        await self.until(lambda: self.conversation.agent is not None and self.conversation.busy)

    async def end_run(self) -> None:
        """The stand-in takes what is queued and ends its run (the test plays the model)."""
        agent = self.conversation.agent
        assert agent is not None
        await agent.steer(END)

    async def until(self, predicate: Callable[[], bool], within: float = WAIT) -> None:
        with anyio.fail_after(within):
            while not predicate():  # noqa: ASYNC110 (polls the chat and the agent)
                await anyio.sleep(0.01)

    async def idle(self) -> None:
        """Until nothing is being handled and everything shown went out."""
        await self.until(lambda: not self.conversation.busy)
        await self.services.outbox.flush()


def room_options(tmp_path: Path, profile: str = "earendil", **overrides: object) -> BridgeOptions:
    env = {"PATH": os.environ.get("PATH", os.defpath), "STANDIN_PROFILE": profile}
    return options(tmp_path / "data", [sys.executable, str(STANDIN)], env, **overrides)


@contextlib.asynccontextmanager
async def room(
    opts: BridgeOptions,
    adapter: RecordingAdapter | None = None,
    first: Sender = OWNER,
    **services: object,
) -> AsyncIterator[Room]:
    """A conversation of `KEY` in `CHAT`, begun by `first`, on real parts and `adapter`
    (a recording platform by default); `services` overrides fields of its `Services`
    (bot_name, prefixes, …)."""
    adapter = adapter or RecordingAdapter(limits=LIMITS)
    store = await open_store("sqlite", opts.data_dir)
    outbox = Outbox(adapter)
    shared = Services(
        adapter=adapter,
        outbox=outbox,
        store=store,
        options=opts,
        gate=AgentSlots(opts.max_agents),
        tokens=new_token,
        clock=time.monotonic,
        wall=time.time,
    )
    for name, value in services.items():
        setattr(shared, name, value)
    conversation = Conversation(KEY, CHAT, first, shared)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(outbox.run)
            await tg.start(conversation.run)
            yield Room(conversation, shared, adapter, store, opts)
            with anyio.CancelScope(shield=True), anyio.move_on_after(WAIT):
                await conversation.reap()
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


def _kind(command: dict[str, object]) -> object:
    """A command's kind; a prompt marked with a `streamingBehavior` (how a steer goes to
    0.73.1) counts as a steer or a follow-up."""
    behaviour = command.get("streamingBehavior")
    if command.get("type") == "prompt" and behaviour:
        return "follow_up" if behaviour == "followUp" else "steer"
    return command.get("type")

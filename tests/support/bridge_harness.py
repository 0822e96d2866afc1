"""A whole bridge (real agent, sqlite store, recording adapter) for end-to-end tests.

`BridgeHarness.start()` runs `Bridge` with the recording adapter in place of a
platform; `say()` and `press()` act as chat users; waits poll the adapter's
state with a deadline, so no test sleeps a fixed time.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from bridge.model import ButtonPress, ChatRef, Inbound, PlatformLimits, Sender
from bridge.options import AgentOptions, BridgeOptions, SandboxOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.agents import SUITE_USER, llm_ports
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping
    from pathlib import Path

    from bridge.model import Button

KEY = "test:1"
CHAT = ChatRef("1")
OWNER = Sender("42", "alice")
STRANGER = Sender("7", "mallory")
WAIT = 60.0  # generous: real agents start slowly on a busy two-core CI machine
# Fast platform: tests watch behaviour, not pacing (the outbox has its own tests).
LIMITS = PlatformLimits(edit_interval=0.2, chat_rate=100.0, global_rate=1000.0)


@dataclass
class BridgeHarness:
    bridge: Bridge
    adapter: RecordingAdapter
    # Delivery ids must be unique across bridge restarts: the store remembers them.
    events: Callable[[], str] = field(default_factory=lambda: lambda: uuid.uuid4().hex[:12])

    async def say(self, text: str, sender: Sender = OWNER, reply_to: str | None = None) -> None:
        # As the platforms do: the message has an id (the run's reactions mark it).
        event = self.events()
        inbound = Inbound(
            KEY, CHAT, sender, f"m{event}", text=text, reply_to=reply_to, message_id=f"u{event}"
        )
        await self.bridge.handle(inbound)

    async def press(self, label: str, sender: Sender = OWNER, contains: str = "") -> None:
        button = await self.button(label, contains)
        press = ButtonPress(button.token, f"p{self.events()}")
        await self.bridge.handle(Inbound(KEY, CHAT, sender, f"e{self.events()}", press=press))

    async def button(self, label: str, contains: str = "") -> Button:
        """The newest live button with this label (on a message containing `contains`)."""
        with anyio.fail_after(WAIT):
            while (found := self._button(label, contains)) is None:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        return found

    def _button(self, label: str, contains: str) -> Button | None:
        for message in reversed(list(self.adapter.messages.values())):
            if message.deleted or contains not in message.text:
                continue
            for row in message.buttons:
                for button in row:
                    if button.label == label or button.label.endswith(label):
                        return button
        return None

    async def until(self, predicate: Callable[[], bool], within: float = WAIT) -> None:
        with anyio.fail_after(within):
            while not predicate():  # noqa: ASYNC110 (polls the adapter's state)
                await anyio.sleep(0.02)

    async def shown(self, text: str, within: float = WAIT) -> str:
        """Wait until a live message contains `text`; returns that message's text."""
        await self.until(lambda: self.find(text) is not None, within)
        found = self.find(text)
        assert found is not None
        return found

    def find(self, text: str) -> str | None:
        for message in reversed(list(self.adapter.messages.values())):
            if not message.deleted and text in message.text:
                return message.text
        return None

    def all_text(self) -> str:
        return "\n---\n".join(m.text for m in self.adapter.messages.values() if not m.deleted)

    async def idle(self, within: float = WAIT) -> None:
        """Until the conversation's run is over and its status says so."""
        await self.until(lambda: not self.conversation_busy(), within)
        await self.bridge.outbox.flush()

    def conversation_busy(self) -> bool:
        conversation = self.bridge.supervisor.conversations.get(KEY)
        return conversation is not None and conversation.busy


def options(
    data_dir: Path,
    argv: list[str],
    env: Mapping[str, str],
    **overrides: object,
) -> BridgeOptions:
    fields: dict[str, object] = {
        "data_dir": data_dir,
        # As deployed: every agent of these journeys runs in its sandbox.
        "agent": AgentOptions(
            argv=tuple(argv),
            env=dict(env),
            sandbox=SandboxOptions(host_ports=llm_ports(env), user=SUITE_USER),
        ),
        "allowed_users": frozenset({OWNER.id, STRANGER.id}),
    }
    fields.update(overrides)
    return BridgeOptions(**fields)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running_bridge(opts: BridgeOptions) -> AsyncIterator[BridgeHarness]:
    adapter = RecordingAdapter(limits=LIMITS)
    store = await open_store("sqlite", opts.data_dir)
    try:
        async with Bridge(adapter, store, opts) as bridge:
            yield BridgeHarness(bridge, adapter)
    finally:
        await store.aclose()

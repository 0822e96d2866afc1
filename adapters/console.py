"""The terminal adapter: the whole bridge (router, renderer, outbox) in a terminal.

Messages print as they are sent; an edit prints only what was appended when the
text grew (streamed answers), else the whole new text. Buttons print as numbered
choices, pressed with `!N`; `!a text` answers the latest question that asks for
a reply. One conversation, key "console", owned by the local user.
"""

from __future__ import annotations

import itertools
import secrets
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

import anyio

from bridge.model import (
    ButtonPress,
    ChatRef,
    Inbound,
    Keyboard,
    Markup,
    MessageGone,
    MessageRef,
    NotModified,
    PlatformLimits,
    ReactionState,
    Sender,
)
from bridge.textsplit import split_text

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

KEY = "console"
CHAT = ChatRef("console")
USER = Sender("console", "you")
LIMITS = PlatformLimits(max_text=8000, edit_interval=0.5, chat_rate=50.0, global_rate=100.0)


@dataclass
class _Shown:
    text: str
    buttons: Keyboard
    force_reply: bool = False


@dataclass
class ConsoleAdapter:
    out: TextIO = field(default_factory=lambda: sys.stdout)
    messages: dict[str, _Shown] = field(default_factory=dict)
    choices: dict[int, str] = field(default_factory=dict)  # number → token
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def limits(self) -> PlatformLimits:
        return LIMITS

    def format(self, markdown: str, limit: int) -> list[str]:
        return split_text(markdown, limit)

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        markup: Markup = "plain",
        buttons: Keyboard = (),
        force_reply: bool = False,
        silent: bool = False,
    ) -> MessageRef:
        message_id = str(next(self._ids))
        self.messages[message_id] = _Shown(text, buttons, force_reply)
        self._write(f"\n{text}\n{self._keys(buttons)}")
        if force_reply:
            self._write("(answer with: !a your text)\n")
        return MessageRef(chat, message_id)

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        shown = self.messages.get(ref.message_id)
        if shown is None:
            raise MessageGone(ref.message_id)
        if shown.text == text and shown.buttons == buttons:
            raise NotModified(ref.message_id)
        if text.startswith(shown.text) and shown.buttons == buttons:
            self._write(text[len(shown.text) :])
        elif text != shown.text or buttons:
            self._write(f"\n{text}\n{self._keys(buttons)}")
        shown.text, shown.buttons = text, buttons

    async def delete(self, ref: MessageRef) -> None:
        self.messages.pop(ref.message_id, None)

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        message_id = str(next(self._ids))
        self._write(f"\n📎 {filename} ({len(data)} bytes) {caption}\n")
        return MessageRef(chat, message_id)

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        if text:
            self._write(f"  ({text})\n")

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        """Typed lines cannot be marked; the status message says the same."""

    def _keys(self, buttons: Keyboard) -> str:
        if not buttons:
            return ""
        shown = []
        for row in buttons:
            for button in row:
                number = next(self._numbers)
                self.choices[number] = button.token
                shown.append(f"[!{number}] {button.label}")
        return "  ".join(shown) + "\n"

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def inbound(self, line: str, event_id: str) -> Inbound | None:
        """A typed line as an inbound; None (with a hint printed) when it makes no sense."""
        if line.startswith("!a "):
            target = next((i for i, m in reversed(self.messages.items()) if m.force_reply), None)
            if target is None:
                self._write("no question is waiting for a reply\n")
                return None
            return Inbound(KEY, CHAT, USER, event_id, text=line[3:], reply_to=target)
        if line.startswith("!") and line[1:].isdigit():
            token = self.choices.get(int(line[1:]))
            if token is None:
                self._write("no such choice\n")
                return None
            return Inbound(KEY, CHAT, USER, event_id, press=ButtonPress(token, f"press-{event_id}"))
        return Inbound(KEY, CHAT, USER, event_id, text=line)


async def chat(
    handle: Callable[[Inbound], Awaitable[None]], adapter: ConsoleAdapter, source: TextIO
) -> None:
    """Feed typed lines to the bridge until end of input."""
    adapter._write("Type a message. /help lists commands; /stop stops a run; Ctrl-D quits.\n")
    # Delivery ids are remembered across restarts: make this run's unique.
    run_id, numbers = secrets.token_hex(4), itertools.count(1)
    async for raw in anyio.wrap_file(source):
        line = raw.strip()
        if not line:
            continue
        inbound = adapter.inbound(line, f"{run_id}-{next(numbers)}")
        if inbound is not None:
            await handle(inbound)

"""A platform with every capability of `bridge.platform`, recording each call.

`EveryCapability` implements `Adapter`, `Streaming`, `Drafting`, `DirectMessages`
and `Forms`; each call is appended to `calls` as its member's name and arguments
(keywords as passed, positionals under their parameter names), and a call that
posts answers a new `MessageRef` (ids count up from 1). `SAMPLES` holds one call of
each call member as data, and `EXPECTED` what `EveryCapability` records for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridge.model import Button, ChatRef, Mention, MessageRef, PlatformLimits, Task
from bridge.platform import PlatformCall

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.model import Form, Keyboard, Markup, ReactionState

CHAT = ChatRef("c1", "t1")
REF = MessageRef(CHAT, "m1")
BUTTONS: Keyboard = ((Button("Yes", "tok-y"), Button("No", "tok-n")),)
TASKS = (Task("call_1", "bash", "complete", "ok"),)
DM = ChatRef("dm-U1")
PING = Mention("U1", "Alice")


@dataclass
class EveryCapability:
    limits: PlatformLimits = field(default_factory=PlatformLimits)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    forms_elsewhere: Callable[[str], Awaitable[Form | None]] | None = None
    _sent: int = 0

    def format(self, markdown: str, limit: int) -> list[str]:
        return [markdown[:limit]]

    def streams_in(self, chat: ChatRef) -> bool:
        return True

    def drafts_in(self, chat: ChatRef) -> bool:
        return True

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        markup: Markup = "plain",
        buttons: Keyboard = (),
        force_reply: bool = False,
        silent: bool = False,
        ping: Mention | None = None,
    ) -> MessageRef:
        args = {"markup": markup, "buttons": buttons, "force_reply": force_reply}
        return self._posted("send", chat, text=text, silent=silent, ping=ping, **args)

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        self._record("edit", ref=ref, text=text, markup=markup, buttons=buttons)

    async def delete(self, ref: MessageRef) -> None:
        self._record("delete", ref=ref)

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        return self._posted("upload", chat, filename=filename, data=data, caption=caption)

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        self._record("answer_press", press_id=press_id, text=text, alert=alert)

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        self._record("react", chat=chat, message_id=message_id, state=state)

    async def start_stream(
        self, chat: ChatRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> MessageRef:
        return self._posted("start_stream", chat, markdown=markdown, tasks=tuple(tasks))

    async def append_stream(
        self, ref: MessageRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> None:
        self._record("append_stream", ref=ref, markdown=markdown, tasks=tuple(tasks))

    async def stop_stream(self, ref: MessageRef, markdown: str) -> None:
        self._record("stop_stream", ref=ref, markdown=markdown)

    async def set_status(self, chat: ChatRef, text: str) -> None:
        self._record("set_status", chat=chat, text=text)

    async def draft(
        self, chat: ChatRef, draft_id: int, text: str, *, markup: Markup = "plain"
    ) -> None:
        self._record("draft", chat=chat, draft_id=draft_id, text=text, markup=markup)

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        self._record("direct_chat", user_id=user_id)
        return DM

    def _record(self, name: str, **args: Any) -> None:
        self.calls.append((name, args))

    def _posted(self, name: str, chat: ChatRef, **args: Any) -> MessageRef:
        self._record(name, chat=chat, **args)
        self._sent += 1
        return MessageRef(chat, str(self._sent))


# One call of each call member, as data, and what `EveryCapability` records for it.
SAMPLES: dict[str, tuple[PlatformCall, dict[str, Any]]] = {
    "send": (
        PlatformCall(
            "send",
            chat=CHAT,
            text="hi",
            markup="formatted",
            buttons=BUTTONS,
            force_reply=True,
            silent=True,
            ping=PING,
        ),
        {
            "chat": CHAT,
            "text": "hi",
            "markup": "formatted",
            "buttons": BUTTONS,
            "force_reply": True,
            "silent": True,
            "ping": PING,
        },
    ),
    "edit": (
        PlatformCall("edit", ref=REF, text="new", markup="formatted", buttons=BUTTONS),
        {"ref": REF, "text": "new", "markup": "formatted", "buttons": BUTTONS},
    ),
    "delete": (PlatformCall("delete", ref=REF), {"ref": REF}),
    "upload": (
        PlatformCall("upload", chat=CHAT, filename="out.bin", data=b"\x00\xff", text="output"),
        {"chat": CHAT, "filename": "out.bin", "data": b"\x00\xff", "caption": "output"},
    ),
    "answer_press": (
        PlatformCall("answer_press", press_id="p1", text="done", alert=True),
        {"press_id": "p1", "text": "done", "alert": True},
    ),
    "react": (
        PlatformCall("react", chat=CHAT, message_id="m7", state="failed"),
        {"chat": CHAT, "message_id": "m7", "state": "failed"},
    ),
    "start_stream": (
        PlatformCall("start_stream", chat=CHAT, text="Think", tasks=TASKS),
        {"chat": CHAT, "markdown": "Think", "tasks": TASKS},
    ),
    "append_stream": (
        PlatformCall("append_stream", ref=REF, text="ing", tasks=TASKS),
        {"ref": REF, "markdown": "ing", "tasks": TASKS},
    ),
    "stop_stream": (
        PlatformCall("stop_stream", ref=REF, text="."),
        {"ref": REF, "markdown": "."},
    ),
    "set_status": (
        PlatformCall("set_status", chat=CHAT, text="is thinking…"),
        {"chat": CHAT, "text": "is thinking…"},
    ),
    "draft": (
        PlatformCall("draft", chat=CHAT, draft_id=42, text="growing", markup="formatted"),
        {"chat": CHAT, "draft_id": 42, "text": "growing", "markup": "formatted"},
    ),
    "direct_chat": (PlatformCall("direct_chat", user_id="U1"), {"user_id": "U1"}),
}

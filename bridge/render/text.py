"""The text of one assistant message, streamed into chat messages.

Text blocks are kept by `contentIndex` (text and tool calls interleave in one
message) and shown joined by a blank line. The Markdown goes through the
platform formatter, which returns messages of at most `max_text`; chunk i lives in
slot ``text:<run>:<msg>:<i>``. Changes are paced per message (`edit_interval`);
`finish` shows the final text at once, taken from `message_end` when it has any.
Invariants: thinking is never shown; a message without text makes no chat
message; a slot whose chunk disappeared is deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.render.views import Pacer, Slot, in_run
from bridge.rpc.content import AssistantMessage, TextContent

# A draft the platform shows is forgotten after a while (Telegram: 30 s after its
# last update); a stalled answer's draft is shown again well inside that.
DRAFT_REFRESH = 20.0

if TYPE_CHECKING:
    from bridge.model import Op
    from bridge.render.views import Context
    from bridge.rpc.events import MessageUpdate


def text_blocks(message: AssistantMessage) -> dict[int, str]:
    return {i: b.text for i, b in enumerate(message.content) if isinstance(b, TextContent)}


def joined(blocks: dict[int, str]) -> str:
    return "\n\n".join(text for _, text in sorted(blocks.items()) if text.strip())


class AssistantText:
    def __init__(self, ctx: Context, prefix: str, run: str = "") -> None:
        self._ctx = ctx
        self._prefix = prefix  # "text:<run>:<msg>"
        self._run = run  # the ops' `run` ("" outside a run)
        self._blocks: dict[int, str] = {}
        self._last_index = 0
        self._slots: list[Slot] = []
        self._pacer = Pacer(ctx.limits.edit_interval)
        self._growing = True  # until `finish`: the last chunk is a draft meanwhile

    @property
    def text(self) -> str:
        return joined(self._blocks)

    @property
    def slots(self) -> list[str]:
        return [s.name for s in self._slots]

    def update(self, event: MessageUpdate, now: float) -> list[Op]:
        if event.message is not None:  # 0.73.1 sends the whole message so far
            return self._replace(text_blocks(event.message), now)
        step = event.assistantMessageEvent
        index = step.contentIndex if step.contentIndex is not None else self._last_index
        if step.type == "text_delta" and step.delta:
            self._last_index = index
            self._blocks[index] = self._blocks.get(index, "") + step.delta
        elif step.type == "text_end" and step.content is not None:
            self._blocks[index] = step.content
        else:
            return []  # thinking and tool-call steps are not shown
        return self._pump(now)

    def finish(self, message: AssistantMessage | None, now: float) -> list[Op]:
        """The message ended: its own content is the final text when it has any."""
        final = text_blocks(message) if message is not None else {}
        if any(text.strip() for text in final.values()):
            self._blocks = final
        self._growing = False
        return self._render(now)

    def flush(self, now: float, *, force: bool = False) -> list[Op]:
        """Show held-back text once the pace allows (`force`: now); keep a stalled
        draft up."""
        if self._pacer.dirty and (force or self._pacer.due(now)):
            return self._render(now)
        if self._growing and self._slots and now - self._pacer.last >= DRAFT_REFRESH:
            self._pacer.sent(now)
            return self._slots[-1].refresh()
        return []

    def _replace(self, blocks: dict[int, str], now: float) -> list[Op]:
        if blocks == self._blocks:
            return []
        self._blocks = blocks
        return self._pump(now)

    def _pump(self, now: float) -> list[Op]:
        self._pacer.dirty = True
        return self._render(now) if self._pacer.due(now) else []

    def _render(self, now: float) -> list[Op]:
        views = self._ctx.views(self.text)
        while len(self._slots) < len(views):
            self._slots.append(Slot(f"{self._prefix}:{len(self._slots)}"))
        ops: list[Op] = []
        last = len(views) - 1
        for i, (slot, view) in enumerate(zip(self._slots, views, strict=False)):
            # Only the last chunk still grows: a chunk with one after it is complete.
            ops += in_run(slot.show(view, draft=self._growing and i == last), self._run)
        for slot in self._slots[len(views) :]:
            ops += slot.remove()
        del self._slots[len(views) :]
        if ops:
            self._pacer.sent(now)
        self._pacer.dirty = False
        return ops

"""Standalone messages: command answers, agent notifications, errors, compaction.

Each notice gets its own slot (long ones several, one per chunk); a notice is sent
once and never edited. The bridge's own (`notice`: a command's answer) are named
``notice:<fresh id>``, unique across processes (bridge/identity.py); those the
agent's records make are named by the run's numbering, ``notice:<run>.<n>``
(``<run>+<n>`` after it), as a replay names them again (`Numbering.note`).
Compaction outside a run (the agent compacting on its own) is one message
``compaction:<run>+<n>``, sent on start and edited on end; a manual compaction is
left to the command that asked for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.identity import fresh_id
from bridge.render.textbits import clip, code_block
from bridge.render.views import Slot, View

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.model import Op
    from bridge.render.views import Context
    from bridge.rpc.events import CompactionEnd, ExtensionError

NOTIFY_ICONS = {
    "info": "ℹ️",  # noqa: RUF001 - the information emoji, meant
    "warning": "⚠️",
    "error": "❌",
}


class Notices:
    def __init__(self, ctx: Context, note: Callable[[], str]) -> None:
        self._ctx = ctx
        self._note = note  # the next name of the agent's one-off messages
        self._compaction: Slot | None = None

    def notice(self, text: str, *, markdown: bool = False, agent: bool = False) -> list[Op]:
        """`text` as new messages: the bridge's own, or (`agent`) from the agent's records."""
        views = self._ctx.views(text) if markdown else self._ctx.plains(text)
        name = self._note if agent else fresh_id
        ops: list[Op] = []
        for view in views:
            ops += Slot(f"notice:{name()}").show(view)
        return ops

    def notify(self, message: str, level: str) -> list[Op]:
        icon = NOTIFY_ICONS.get(level, NOTIFY_ICONS["info"])
        return self.notice(f"{icon} {message.strip() or level}", agent=True)

    def editor_text(self, text: str) -> list[Op]:
        suggested = f"✏️ suggested text:\n{code_block(text)}"
        return self.notice(suggested, markdown=True, agent=True)

    def extension_error(self, event: ExtensionError) -> list[Op]:
        where = event.extensionPath.rsplit("/", 1)[-1]
        context = ", ".join(p for p in (where, event.event) if p)
        return self.notice(
            f"⚠️ extension error{f' ({context})' if context else ''}: {clip(event.error, 1000)}",
            agent=True,
        )

    def error(self, text: str) -> list[Op]:
        return self.notice(f"⚠️ {clip(text, 1000) or 'the agent reported an error'}", agent=True)

    def compaction_started(self) -> list[Op]:
        self._compaction = Slot(f"compaction:{self._note()}", silent=True)
        return self._compaction.show(View("🗜 compacting the context…"))

    def compaction_ended(self, event: CompactionEnd | None) -> list[Op]:
        slot, self._compaction = self._compaction, None
        if event is not None and (event.errorMessage or event.aborted):
            text = f"⚠️ compaction failed: {clip(event.errorMessage or 'aborted', 300)}"
            return (slot or Slot(f"compaction:{self._note()}")).show(View(text))
        return slot.show(View("🗜 context compacted")) if slot else []

"""Messages waiting in a busy agent's queue, shown with the buttons that change them.

Each waiting steer or follow-up with a button to offer gets one short, silent
message, e.g. "⏭ waiting for the end of the run: “run the tests”" with [➡️ Steer now]
[✖ Cancel], edited in place when the agent takes it or someone withdraws it: the
buttons go and their tokens retire. One without buttons (a steer the agent cannot
give back) gets no message of its own: the 👀 on it says it reached the run. `/queue`
lists every waiting one in one message with the same buttons; the newest list is
kept current, older ones lose their buttons. A withdrawn message that rode in the
run (riders.py) leaves it, marked failed: it will not run.
Slots ``queued:<entry>`` and ``queue:<fresh id>`` (bridge/identity.py: a list is
never one an earlier process posted); token owner ``queued:<entry>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.identity import fresh_id
from bridge.model import Button, React
from bridge.render.choices import QueueChoice
from bridge.render.textbits import one_line
from bridge.render.views import Slot

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Op
    from bridge.render.choices import QueueAction as Action
    from bridge.render.riders import Riders
    from bridge.render.views import Context

LABELS: dict[Action, str] = {"steer_now": "➡️ Steer now", "cancel": "✖ Cancel"}
QUOTE = 100  # characters of the message quoted: about two lines on a phone


def quote(text: str) -> str:
    return f"“{one_line(text, QUOTE)}”" if text.strip() else "a picture"


@dataclass
class _Shown:
    line: str
    actions: tuple[Action, ...] = ()
    buttons: tuple[Button, ...] = ()
    slot: Slot | None = None  # its own message, once it had buttons to show


class QueueView:
    def __init__(self, ctx: Context, riders: Riders) -> None:
        self._ctx, self._riders = ctx, riders
        self._shown: dict[str, _Shown] = {}  # by entry id, while it waits
        self._list: Slot | None = None
        self._listed: dict[str, str] = {}  # entry id → its line in the newest list

    def held(self, message_id: str | None) -> list[Op]:
        """The bridge keeps the user's message for the end of the run: it shows it is
        in hand, as a message that went into the run does (`Renderer.joined`)."""
        return [React(message_id, "working")] if message_id else []

    def waiting(
        self, entry_id: str, text: str, steer: bool, actions: tuple[Action, ...]
    ) -> list[Op]:
        """Entry `entry_id` waits, as a steer or a follow-up, offering `actions`."""
        where = "➡️ waiting for the next step" if steer else "⏭ waiting for the end of the run"
        line = f"{where}: {quote(text)}"
        shown = self._shown.setdefault(entry_id, _Shown(line))
        shown.line = line
        if actions != shown.actions:
            owner = f"queued:{entry_id}"
            self._ctx.book.retire(owner)
            shown.actions = actions
            shown.buttons = tuple(
                Button(LABELS[a], self._ctx.book.issue(owner, QueueChoice(entry_id, a)))
                for a in actions
            )
        if shown.slot is None and shown.buttons:
            shown.slot = Slot(f"queued:{entry_id}", silent=True)
        ops: list[Op] = []
        if shown.slot is not None:
            keyboard = (shown.buttons,) if shown.buttons else ()
            ops += shown.slot.show(self._ctx.plain(line).with_buttons(keyboard))
        return ops + self._relist(entry_id, line)

    def close(
        self, entry_id: str, text: str, outcome: str, withdrawn: str | None = None
    ) -> list[Op]:
        """Entry `entry_id` stopped waiting: its message says `outcome`, its buttons go.
        `withdrawn`: the user's message, which will not run now."""
        self._ctx.book.retire(f"queued:{entry_id}")
        shown = self._shown.pop(entry_id, None)
        line = f"{outcome}: {quote(text)}"
        ops: list[Op] = []
        if shown is not None and shown.slot is not None:
            ops += shown.slot.show(self._ctx.plain(line))
        if withdrawn is not None:
            self._riders.drop(withdrawn)
            ops.append(React(withdrawn, "failed"))
        return ops + self._relist(entry_id, line)

    def listing(self, entry_ids: Sequence[str]) -> list[Op]:
        """The /queue list of the waiting entries `entry_ids`, with their buttons."""
        ops: list[Op] = []
        old = self._list
        if old is not None and old.shown is not None and old.shown.buttons:
            ops += old.show(old.shown.with_buttons(()))  # one list to press at a time
        self._list = Slot(f"queue:{fresh_id()}")
        self._listed = {i: self._shown[i].line for i in entry_ids if i in self._shown}
        return ops + self._relist()

    def _relist(self, entry_id: str | None = None, line: str = "") -> list[Op]:
        if self._list is None or (entry_id is not None and entry_id not in self._listed):
            return []
        if entry_id is not None:
            self._listed[entry_id] = line
        lines = ["Waiting:"]
        rows: list[tuple[Button, ...]] = []
        for n, (listed_id, listed_line) in enumerate(self._listed.items(), 1):
            lines.append(f"{n}. {listed_line}")
            shown = self._shown.get(listed_id)
            if shown is not None and shown.buttons:
                rows.append(tuple(Button(f"{b.label} {n}", b.token) for b in shown.buttons))
        return self._list.show(self._ctx.plain("\n".join(lines)).with_buttons(tuple(rows)))

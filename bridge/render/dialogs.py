"""Questions with buttons: agent dialogs and the bridge's own "agent is busy".

`select` gets one button per option plus [Cancel]; `confirm` gets [Yes] [No];
`input`/`editor` ask for a reply to the message (ForceReply) plus [Cancel], the
editor showing its prefill in a code block. A request's `timeout` is shown as
"expires in N s". Closing a question edits its message to add the outcome,
removes the buttons and retires their tokens. Invariants: every button's token
maps back to exactly one choice until its question closes; a closed question is
forgotten, so closing it again is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.model import Button, Keyboard, rows
from bridge.render.choices import BusyChoice, DialogChoice
from bridge.render.textbits import clip, code_block, delay
from bridge.render.views import Slot, View
from bridge.rpc.ui import ConfirmRequest, EditorRequest, InputRequest, SelectRequest

if TYPE_CHECKING:
    from bridge.model import Op
    from bridge.render.choices import Choice
    from bridge.render.views import Context
    from bridge.rpc.ui import DialogRequest

LABEL_CHARS = 40  # of a button label; the choice keeps the whole option


@dataclass
class Question:
    slot: Slot
    source: str  # the message text before any outcome
    markdown: bool
    owner: str  # token owner key in the book
    wants_reply: bool = False


class Questions:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._open: dict[str, Question] = {}  # by slot name

    # --- agent dialogs ------------------------------------------------------------

    def open_dialog(self, request: DialogRequest) -> list[Op]:
        name = f"dialog:{request.id}"
        if name in self._open:
            return []  # a repeated request id: the first message stands
        text, markdown = _dialog_text(request)
        wants_reply = isinstance(request, InputRequest | EditorRequest)
        question = Question(Slot(name, force_reply=wants_reply), text, markdown, name, wants_reply)
        self._open[name] = question
        buttons = self._buttons(name, _dialog_choices(request))
        return question.slot.show(self._view(question).with_buttons(buttons))

    def dialog_tokens(self, request_id: str) -> list[tuple[str, DialogChoice]]:
        owner = f"dialog:{request_id}"
        if owner not in self._open:
            return []
        return [(t, c) for t, c in self._ctx.book.owned(owner) if isinstance(c, DialogChoice)]

    def dialog_slot(self, request_id: str) -> str | None:
        name = f"dialog:{request_id}"
        return name if name in self._open else None

    def input_dialogs(self) -> list[str]:
        return [n.removeprefix("dialog:") for n, q in self._open.items() if q.wants_reply]

    # --- the busy question ----------------------------------------------------------

    def ask_busy(self, pending_id: str, preview: str) -> list[Op]:
        name = f"busy:{pending_id}"
        if name in self._open:
            return []
        quoted = f"“{clip(preview.strip(), 200)}”" if preview.strip() else "your message"
        text = f"⏳ The agent is busy. Send {quoted} now, or after this run?"
        question = Question(Slot(name), text, False, name)
        self._open[name] = question
        choices: list[tuple[str, Choice]] = [
            ("➡️ Steer now", BusyChoice("steer", pending_id)),
            ("⏭ After this run", BusyChoice("follow_up", pending_id)),
        ]
        return question.slot.show(self._view(question).with_buttons(self._buttons(name, choices)))

    # --- closing ----------------------------------------------------------------------

    def close(self, name: str, outcome: str) -> list[Op]:
        question = self._open.pop(name, None)
        if question is None:
            return []
        self._ctx.book.retire(question.owner)
        return question.slot.show(self._view(question, outcome))

    def close_all(self, outcome: str) -> list[Op]:
        ops: list[Op] = []
        for name in list(self._open):
            ops += self.close(name, outcome)
        return ops

    # --- views --------------------------------------------------------------------------

    def _view(self, question: Question, outcome: str = "") -> View:
        text = f"{question.source}\n\n{outcome}" if outcome else question.source
        return self._ctx.view(text) if question.markdown else self._ctx.plain(text)

    def _buttons(self, owner: str, choices: list[tuple[str, Choice]]) -> Keyboard:
        per_row = self._ctx.limits.max_buttons_per_row
        issued = [
            Button(clip(label, LABEL_CHARS), self._ctx.book.issue(owner, c)) for label, c in choices
        ]
        # Cancel goes on a row of its own, away from the answers.
        if (
            len(issued) > 1
            and isinstance(choices[-1][1], DialogChoice)
            and choices[-1][1].cancelled
        ):
            return (*rows(issued[:-1], per_row), (issued[-1],))
        return rows(issued, per_row)


def _dialog_text(request: DialogRequest) -> tuple[str, bool]:
    """The message text of a dialog, and whether it is Markdown."""
    title = request.title.strip()
    expiry = f"\n\n⏳ expires in {delay(request.timeout / 1000)}" if request.timeout else ""
    if isinstance(request, ConfirmRequest):
        body = "\n\n".join(p for p in (title or "❓ Confirm?", request.message.strip()) if p)
        return body + expiry, False
    if isinstance(request, SelectRequest):
        return (title or "❓ Choose one:") + expiry, False
    ask = f"✍️ {title or 'Your answer?'} — reply to this message with your answer"
    if isinstance(request, InputRequest):
        hint = f"\n(e.g. {clip(request.placeholder, 200)})" if request.placeholder else ""
        return ask + hint + expiry, False
    prefill = f"\n{code_block(request.prefill)}" if request.prefill else ""
    return ask + prefill + expiry, bool(prefill)


def _dialog_choices(request: DialogRequest) -> list[tuple[str, Choice]]:
    rid = request.id
    if isinstance(request, ConfirmRequest):
        return [
            ("Yes", DialogChoice(rid, "Yes", confirmed=True)),
            ("No", DialogChoice(rid, "No", confirmed=False)),
        ]
    options: list[tuple[str, Choice]] = []
    if isinstance(request, SelectRequest):
        options = [(o, DialogChoice(rid, o, value=o)) for o in request.options]
    return [*options, ("✖ Cancel", DialogChoice(rid, "Cancel", cancelled=True))]

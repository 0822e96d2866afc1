"""Questions with buttons: agent dialogs, the bridge's "agent is busy", and pickers.

`select` gets one button per option plus [Cancel]; `confirm` gets [Yes] [No];
`input`/`editor` get [✍️ Answer] [✖ Cancel], the editor showing its prefill in a
code block. [Answer] carries a `Form`: a platform with forms (Slack modals) sends
the typed text with the press; otherwise `ask_reply` posts a ForceReply message,
and a reply to it, a reply to the dialog's own message, or the presser's next
message answers (`reply_targets`, `awaiting`). A request's `timeout` is shown as
"expires in N s". Closing a question edits its messages to add the outcome,
removes the buttons and retires their tokens. Invariants: every button's token
maps back to exactly one choice until its question closes; a closed question is
forgotten, so closing it again is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.model import Button, Form, Keyboard
from bridge.render.choices import BusyChoice, DialogChoice, PickerChoice
from bridge.render.pings import question_ping
from bridge.render.textbits import clip, code_block, delay
from bridge.render.views import Slot, View
from bridge.rpc.ui import ConfirmRequest, EditorRequest, InputRequest, SelectRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Mention, Op
    from bridge.render.choices import Choice, PickerOption
    from bridge.render.views import Context
    from bridge.rpc.ui import DialogRequest

LABEL_CHARS = 40  # of a button label; the choice keeps the whole option
OUTCOME_CHARS = 200  # of a pressed picker button's label, shown when its picker closes
ANSWER = "✍️ Answer"
REPLY_PROMPT = "✍️ Reply to this message with your answer, or just send it as your next message."


@dataclass
class Question:
    slot: Slot
    source: str  # the message text before any outcome
    markdown: bool
    owner: str  # token owner key in the book
    wants_reply: bool = False
    prompt: Slot | None = None  # the "reply to this message" message, once asked for
    awaiting: str = ""  # who pressed [Answer] without a form: their next message answers
    title: str = ""


class Questions:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._open: dict[str, Question] = {}  # by slot name

    def _ping(self) -> Mention | None:
        """A question waiting for its person pings them, if `[notify] questions`."""
        return question_ping(self._ctx.notify, self._ctx.person)

    # --- agent dialogs ------------------------------------------------------------

    def open_dialog(self, request: DialogRequest) -> list[Op]:
        name = f"dialog:{request.id}"
        if name in self._open:
            return []  # a repeated request id: the first message stands
        text, markdown = _dialog_text(request)
        wants_reply = isinstance(request, InputRequest | EditorRequest)
        # No ForceReply here: Telegram allows it or buttons on a message, not both.
        question = Question(Slot(name, ping=self._ping()), text, markdown, name, wants_reply)
        question.title = request.title.strip()
        self._open[name] = question
        buttons = self._buttons(name, _dialog_choices(request))
        return question.slot.show(self._view(question).with_buttons(buttons))

    def open_approval(
        self, request_id: str, markdown: str, choices: Sequence[tuple[str, DialogChoice]]
    ) -> list[Op]:
        """A question of the approval gate (bridge/conversation/approval_questions.py):
        `markdown` already cut to fit one message, the gate's answers two to a row."""
        name = f"dialog:{request_id}"
        if name in self._open:
            return []
        question = Question(Slot(name, ping=self._ping()), markdown, True, name)
        self._open[name] = question
        buttons = self._buttons(name, list(choices), 2)
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

    def ask_reply(self, request_id: str, sender_id: str) -> list[Op]:
        """[Answer] pressed without a typed answer: a message to reply to (ForceReply),
        and the presser's next message answers too. Asked again, only the presser changes."""
        question = self._open.get(f"dialog:{request_id}")
        if question is None or not question.wants_reply:
            return []
        question.awaiting = sender_id
        if question.prompt is not None:
            return []
        question.prompt = Slot(f"reply:{request_id}", force_reply=True)
        title = f"\n“{clip(question.title, 200)}”" if question.title else ""
        return question.prompt.show(self._ctx.plain(REPLY_PROMPT + title))

    def reply_targets(self) -> dict[str, str]:
        """Slot → request id of every message a reply to which answers an input dialog."""
        targets: dict[str, str] = {}
        for name, question in self._open.items():
            if question.wants_reply:
                request_id = name.removeprefix("dialog:")
                targets[name] = request_id
                if question.prompt is not None:
                    targets[question.prompt.name] = request_id
        return targets

    def awaiting(self) -> dict[str, str]:
        """Sender id → request id of the input dialog their next message answers."""
        return {q.awaiting: n.removeprefix("dialog:") for n, q in self._open.items() if q.awaiting}

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

    # --- pickers -----------------------------------------------------------------------

    def pick(
        self, picker_id: str, kind: str, title: str, options: Sequence[PickerOption], per_row: int
    ) -> list[Op]:
        """A picker of the bridge's commands: one button per option."""
        name = f"picker:{picker_id}"
        question = Question(Slot(name), title, False, name)
        self._open[name] = question
        issued: list[tuple[str, Choice]] = [
            (o.label, PickerChoice(kind, o.value, picker_id, o.outcome or _pressed(o.label)))
            for o in options
        ]
        buttons = self._buttons(name, list(issued), per_row)
        return question.slot.show(self._view(question).with_buttons(buttons))

    # --- closing ----------------------------------------------------------------------

    def close(self, name: str, outcome: str) -> list[Op]:
        question = self._open.pop(name, None)
        if question is None:
            return []
        self._ctx.book.retire(question.owner)
        ops = question.slot.show(self._view(question, outcome))
        prompt = question.prompt
        if prompt is not None and prompt.shown is not None:
            ops += prompt.show(self._ctx.plain(f"{prompt.shown.text}\n\n{outcome}"))
        return ops

    def any_open(self) -> bool:
        return bool(self._open)

    def close_all(self, outcome: str) -> list[Op]:
        ops: list[Op] = []
        for name in list(self._open):
            ops += self.close(name, outcome)
        return ops

    # --- views --------------------------------------------------------------------------

    def _view(self, question: Question, outcome: str = "") -> View:
        text = f"{question.source}\n\n{outcome}" if outcome else question.source
        return self._ctx.view(text) if question.markdown else self._ctx.plain(text)

    def _buttons(
        self, owner: str, choices: list[tuple[str, Choice]], per_row: int | None = None
    ) -> Keyboard:
        per_row = per_row or self._ctx.limits.max_buttons_per_row
        issued = [
            Button(clip(label, LABEL_CHARS), self._ctx.book.issue(owner, c), _form(c))
            for label, c in choices
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
    ask = f"✍️ {title or 'Your answer?'} — press ✍️ Answer to reply"
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
    elif isinstance(request, InputRequest | EditorRequest):
        options = [(ANSWER, DialogChoice(rid, "Answer", form=_request_form(request)))]
    return [*options, ("✖ Cancel", DialogChoice(rid, "Cancel", cancelled=True))]


def _request_form(request: InputRequest | EditorRequest) -> Form:
    title = request.title.strip() or "Your answer?"
    if isinstance(request, EditorRequest):
        return Form(title, prefill=request.prefill or "", multiline=True)
    return Form(title, placeholder=request.placeholder or "")


def _pressed(label: str) -> str:
    """What a picker says once its button `label` is pressed."""
    return f"✓ {clip(label, OUTCOME_CHARS)}"


def _form(choice: Choice) -> Form | None:
    return choice.form if isinstance(choice, DialogChoice) else None


def rows(buttons: Sequence[Button], per_row: int) -> Keyboard:
    """Lay buttons out in rows of at most `per_row`."""
    per_row = max(1, per_row)
    return tuple(tuple(buttons[i : i + per_row]) for i in range(0, len(buttons), per_row))

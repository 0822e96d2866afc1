"""The renderer turns agent events into the chat a user sees (pure: a fake clock, no I/O).

Transcript replays feed real agent output through the renderer, with the run
signals the client would add, and check the final chat; the other tests pin one
behaviour each: pacing, long text, buttons, verbosity, uploads, notices, status
lines, interruption, and odd input.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from bridge.model import (
    AnswerPress,
    ConversationSettings,
    Delete,
    Edit,
    Form,
    Keyboard,
    Op,
    PlatformLimits,
    React,
    Send,
    Upload,
)
from bridge.render import (
    BusyChoice,
    DialogChoice,
    PickerChoice,
    PickerOption,
    Renderer,
    StopChoice,
)
from bridge.render.riders import Riders
from bridge.render.textsplit import split_text
from bridge.rpc.content import AssistantMessage, ToolResult, UserMessage, text_of
from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.events import (
    AgentStart,
    AutoRetryStart,
    MessageEnd,
    Response,
    ToolExecutionEnd,
    ToolExecutionStart,
    UnknownEvent,
)
from bridge.rpc.framing import OversizedRecord
from bridge.rpc.profile import ATOMIC, EARENDIL, EARENDIL_1, LEGACY, PI
from bridge.rpc.signals import AgentGone, DialogExpired, OrphanResponse, RunEnded, RunStarted
from bridge.rpc.state import PendingDialog, Phase, RunChange, RunState
from bridge.rpc.ui import DIALOG_METHODS, SelectRequest
from tests.support.paths import TRANSCRIPTS, transcript_dir

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from bridge.model import Verbosity
    from bridge.rpc.agent_event import AgentEvent
    from bridge.rpc.profile import Profile

PROFILES: dict[str, Profile] = {
    "v0731": PI,
    "e0871": EARENDIL,
    "atomic": ATOMIC,
    "o0132": LEGACY,
    "p152": EARENDIL_1,
}
LIMITS = PlatformLimits()
FINAL_STATUS = ("✅ done", "⚠️ failed", "⏹ stopped", "⚠️ interrupted")


# --- a tiny chat that carries out the ops ------------------------------------------------------


def formatter(markdown: str, limit: int) -> list[str]:
    return split_text(markdown, limit)


@dataclass
class Message:
    text: str
    plain: str
    buttons: Keyboard
    silent: bool
    force_reply: bool


@dataclass
class Chat:
    """Slot → what the message shows now; asserts every op makes sense for its slot."""

    limits: PlatformLimits = LIMITS
    messages: dict[str, Message] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    uploads: dict[str, Upload] = field(default_factory=dict)
    ops: Counter[str] = field(default_factory=Counter)

    def take(self, ops: list[Op]) -> list[Op]:
        for op in ops:
            if not isinstance(op, AnswerPress | React):
                self.ops[op.slot] += 1
            self._one(op)
        return ops

    def _one(self, op: Op) -> None:
        if isinstance(op, Send):
            assert op.slot not in self.messages, f"a second Send for {op.slot}"
            self._check(op.text)
            self.messages[op.slot] = Message(
                op.text, op.plain, op.buttons, op.silent, op.force_reply
            )
            self.order.append(op.slot)
        elif isinstance(op, Edit):
            assert op.slot in self.messages, f"an Edit of unknown {op.slot}"
            self._check(op.text)
            shown = self.messages[op.slot]
            shown.text, shown.plain, shown.buttons = op.text, op.plain, op.buttons
        elif isinstance(op, Delete):
            del self.messages[op.slot]
        elif isinstance(op, Upload):
            self.uploads[op.slot] = op

    def _check(self, text: str) -> None:
        assert text.strip(), "an empty message"
        assert len(text) <= self.limits.max_text

    def text(self, slot: str) -> str:
        return self.messages[slot].text

    def tokens(self, slot: str) -> list[str]:
        return [b.token for row in self.messages[slot].buttons for b in row]

    def labels(self, slot: str) -> list[str]:
        return [b.label for row in self.messages[slot].buttons for b in row]

    def slots(self, prefix: str) -> list[str]:
        return [s for s in self.order if s.startswith(prefix) and s in self.messages]


class Session:
    """A renderer, its chat and a fake clock."""

    def __init__(
        self,
        limits: PlatformLimits = LIMITS,
        settings: ConversationSettings | None = None,
        **options: Any,
    ) -> None:
        self.counter = itertools.count(1)
        self.renderer = Renderer(
            limits=limits,
            formatter=formatter,
            tokens=lambda: f"tok{next(self.counter)}",
            settings=settings or ConversationSettings(),
            **options,
        )
        self.chat = Chat(limits)
        self.now = 100.0

    def feed(self, *events: AgentEvent, step: float = 0.05) -> list[Op]:
        ops: list[Op] = []
        for event in events:
            self.now += step
            ops += self.chat.take(self.renderer.apply(event, self.now))
        return ops

    def tick(self, after: float) -> list[Op]:
        self.now += after
        return self.chat.take(self.renderer.tick(self.now))

    def do(self, ops: list[Op]) -> list[Op]:
        return self.chat.take(ops)


# --- events as the agents write them ---------------------------------------------------------


def event(**fields: Any) -> AgentEvent:
    decoded = decode_record(json.dumps(fields).encode())
    assert not isinstance(decoded, MalformedRecord | OversizedRecord), decoded
    return decoded


def assistant(
    text: str = "", stop: str = "stop", error: str | None = None, cost: float = 0.0
) -> Any:
    content = [{"type": "text", "text": text}] if text else []
    usage = {"input": 1, "output": 1, "cost": {"total": cost}}
    return {
        "role": "assistant",
        "content": content,
        "stopReason": stop,
        "errorMessage": error,
        "usage": usage,
    }


def start() -> AgentEvent:
    return event(type="message_start", message=assistant(stop="pending"))


def delta(text: str, index: int = 0) -> AgentEvent:
    step = {"type": "text_delta", "contentIndex": index, "delta": text}
    return event(type="message_update", assistantMessageEvent=step)


def end(text: str = "", **kw: Any) -> AgentEvent:
    return event(type="message_end", message=assistant(text, **kw))


def answer(text: str, **kw: Any) -> list[AgentEvent]:
    return [start(), delta(text), end(text, **kw)]


def tool_start(call: str, name: str = "bash", **args: Any) -> AgentEvent:
    return event(type="tool_execution_start", toolCallId=call, toolName=name, args=args)


def tool_update(call: str, output: str, name: str = "bash") -> AgentEvent:
    result = {"content": [{"type": "text", "text": output}]}
    return event(type="tool_execution_update", toolCallId=call, toolName=name, partialResult=result)


def tool_end(call: str, output: str = "", name: str = "bash", error: bool = False) -> AgentEvent:
    result = {"content": [{"type": "text", "text": output}]}
    return event(
        type="tool_execution_end", toolCallId=call, toolName=name, result=result, isError=error
    )


def ui(method: str, id: str = "req-1", **fields: Any) -> AgentEvent:
    return event(type="extension_ui_request", id=id, method=method, **fields)


def one_run(session: Session, *events: AgentEvent) -> None:
    session.feed(RunStarted(), event(type="agent_start"), *events)
    session.feed(event(type="agent_end", messages=[]), RunEnded())


# --- transcript replays ----------------------------------------------------------------------


def transcripts(*folders: str) -> list[Path]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(p for f in folders for p in transcript_dir(f).glob("*.stdout.jsonl"))


def records(path: Path) -> list[AgentEvent]:
    lines = path.read_bytes().split(b"\n")  # LF only: the text holds raw U+2028
    return [decode_record(line.removesuffix(b"\r")) for line in lines if line.strip()]


def exit_code(path: Path) -> int | None:
    timeline = path.with_name(path.name.replace(".stdout.jsonl", ".timeline.txt"))
    found = re.search(r"exit code (-?\d+)", timeline.read_text()) if timeline.exists() else None
    return int(found.group(1)) if found else None


def with_signals(path: Path) -> Iterator[AgentEvent]:
    """The events as the client hands them on: run signals added by `RunState`, responses
    routed away, and the exit reported at the end."""
    state = RunState(profile=PROFILES[path.parent.name])
    for n, record in enumerate(records(path)):
        # Anything but a retry after an error's agent_end means the grace passed.
        retry = isinstance(record, AutoRetryStart)
        if state.phase is Phase.SETTLING and not retry and state.settle() is RunChange.ENDED:
            yield RunEnded()
        if isinstance(record, Response):
            continue
        change = state.apply(record, float(n))
        if change is RunChange.STARTED:
            yield RunStarted()
        yield record
        if change is RunChange.ENDED:
            yield RunEnded()
    if state.settle() is RunChange.ENDED or state.agent_exited() is RunChange.ENDED:
        yield RunEnded()
    yield AgentGone(exit_code(path), "")


def replay(path: Path) -> Session:
    session = Session()
    for n, item in enumerate(with_signals(path)):
        session.feed(item)
        if n % 5 == 0:
            session.tick(0)
    session.tick(10)
    return session


def expected_texts(path: Path) -> list[str]:
    ends = [r for r in records(path) if isinstance(r, MessageEnd)]
    texts = [_joined(r.message) for r in ends if isinstance(r.message, AssistantMessage)]
    return [t for t in texts if t.strip()]


def _joined(message: AssistantMessage) -> str:
    blocks = [b for b in message.content if getattr(b, "type", "") == "text"]
    return "\n\n".join(t for t in (text_of([b]) for b in blocks) if t.strip())


def shown_texts(chat: Chat) -> list[str]:
    by_message: dict[str, list[str]] = {}
    for slot in chat.slots("text:"):
        by_message.setdefault(slot.rsplit(":", 1)[0], []).append(chat.text(slot))
    return ["".join(chunks) for chunks in by_message.values()]


REPLAYED = transcripts("v0731", "e0871", "atomic", "o0132", "p152")
needs_transcripts = pytest.mark.skipif(not REPLAYED, reason=f"no transcripts at {TRANSCRIPTS}")


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name.removesuffix('.stdout.jsonl')}"


@needs_transcripts
@pytest.mark.parametrize("path", REPLAYED, ids=_id)
def test_a_replayed_transcript_leaves_every_run_status_finished_without_buttons(
    path: Path,
) -> None:
    chat = replay(path).chat
    for slot in chat.slots("status:"):
        assert chat.text(slot).startswith(FINAL_STATUS), chat.text(slot)
        assert chat.messages[slot].buttons == ()


@needs_transcripts
@pytest.mark.parametrize(
    "path",
    # o_abort_and_busy: the legacy agent runs two prompts at once, interleaving their
    # text; the client queues for it, so the renderer never sees that stream.
    # k_term_run: ended mid-answer, so no message_end; what streamed stays shown.
    [
        p
        for p in REPLAYED
        if p.name not in ("o_abort_and_busy.stdout.jsonl", "k_term_run.stdout.jsonl")
    ],
    ids=_id,
)
def test_a_replayed_transcript_shows_each_assistant_text_as_the_agent_ended_it(
    path: Path,
) -> None:
    assert shown_texts(replay(path).chat) == expected_texts(path)


@needs_transcripts
@pytest.mark.parametrize("path", REPLAYED, ids=_id)
def test_a_replayed_transcript_shows_one_message_per_tool_call_ending_in_its_outcome(
    path: Path,
) -> None:
    chat = replay(path).chat
    started = [r.toolCallId for r in records(path) if isinstance(r, ToolExecutionStart)]
    ended = {r.toolCallId: r for r in records(path) if isinstance(r, ToolExecutionEnd)}
    assert chat.slots("tool:") == [f"tool:{call}" for call in started]
    for call in started:
        outcome = ended.get(call)
        icon = "⚠️" if outcome is None else "❌" if outcome.isError else "✅"
        assert chat.text(f"tool:{call}").startswith(icon)


@needs_transcripts
@pytest.mark.parametrize("path", REPLAYED, ids=_id)
def test_a_replayed_transcript_retires_every_button_when_the_agent_exits(path: Path) -> None:
    session = replay(path)
    requests = [r for r in records(path) if getattr(r, "method", "") in DIALOG_METHODS]
    for request in requests:
        slot = f"dialog:{getattr(request, 'id', '')}"
        assert slot in session.chat.messages
        assert session.chat.messages[slot].buttons == ()
        assert "✖ agent stopped" in session.chat.text(slot)
    issued = range(1, next(session.counter))
    assert all(session.renderer.pressed(f"tok{n}") is None for n in issued)


RUN_OUTCOMES = [
    ("v0731", "a_plain", ["✅ done · "]),
    ("v0731", "b_bash", ["✅ done · ", "✅ done · "]),
    ("v0731", "c1_perm_yes", ["✅ done · "]),
    ("v0731", "d2_steer_twotools", ["✅ done · "]),
    ("v0731", "e1_follow_up", ["✅ done · "]),
    ("v0731", "f1_abort_text", ["⏹ stopped · ", "✅ done · "]),
    ("v0731", "f2_abort_tool", ["⏹ stopped · "]),
    ("v0731", "x_retry", ["✅ done · "]),
    ("v0731", "x2_retry_giveup", ["⚠️ failed · "]),
    ("v0731", "k_resume-p3", ["⚠️ interrupted · "]),
    ("e0871", "a_plain", ["✅ done · "]),
    ("e0871", "d1_steer_tool", ["✅ done · "]),
    ("e0871", "e1_follow_up", ["✅ done · "]),
    ("e0871", "f1_abort_text", ["⏹ stopped · ", "✅ done · "]),
    ("e0871", "f3_abort_pending_ui", ["⏹ stopped · "]),
    ("e0871", "x2_retry_giveup", ["⚠️ failed · "]),
    ("atomic", "f2_abort_tool", ["⏹ stopped · "]),
    ("o0132", "o_b_bash", ["✅ done · "]),
    ("p152", "a_plain", ["✅ done · "]),
    ("p152", "b_bash", ["✅ done · "]),
    ("p152", "d1_steer_tool", ["✅ done · "]),
    ("p152", "e1_follow_up", ["✅ done · "]),
    ("p152", "f1_abort_text", ["⏹ stopped · "]),
    ("p152", "f2_abort_tool", ["⏹ stopped · "]),
    ("p152", "k_term_run", ["⚠️ interrupted · "]),
]


@needs_transcripts
@pytest.mark.parametrize(
    ("folder", "name", "outcomes"), RUN_OUTCOMES, ids=[f"{f}/{n}" for f, n, _ in RUN_OUTCOMES]
)
def test_a_replayed_run_ends_done_failed_stopped_or_interrupted_as_it_did(
    folder: str, name: str, outcomes: list[str]
) -> None:
    path = transcript_dir(folder) / f"{name}.stdout.jsonl"
    if not path.exists():
        pytest.skip(f"transcript {path} is missing")
    chat = replay(path).chat
    statuses = [chat.text(s) for s in chat.slots("status:")]
    assert len(statuses) == len(outcomes)
    for status, outcome in zip(statuses, outcomes, strict=True):
        assert status.startswith(outcome), status


@needs_transcripts
def test_a_run_cut_by_a_kill_names_the_exit_in_its_status() -> None:
    path = TRANSCRIPTS / "v0731" / "k_resume-p3.stdout.jsonl"
    if not path.exists():
        pytest.skip("k_resume-p3 is missing")
    chat = replay(path).chat
    assert chat.text("status:1").endswith("agent stopped (exit -9)")


@needs_transcripts
def test_a_permission_dialog_from_a_transcript_maps_its_buttons_back_to_its_options() -> None:
    path = TRANSCRIPTS / "v0731" / "c1_perm_yes.stdout.jsonl"
    if not path.exists():
        pytest.skip("c1_perm_yes is missing")
    session = Session()
    request_id = ""
    for item in with_signals(path):
        session.feed(item)
        if getattr(item, "method", "") == "select":
            request_id = str(getattr(item, "id", ""))
            break
    choices = dict(session.renderer.dialog_tokens(request_id))
    assert [c.value for c in choices.values()] == ["Yes", "No", None]
    assert session.chat.tokens(f"dialog:{request_id}") == list(choices)
    assert "rm -rf build" in session.chat.text(f"dialog:{request_id}")


# --- pacing -------------------------------------------------------------------------------------

PACING = [
    (2000, 0.001, 1.0),
    (2000, 0.001, 3.0),
    (400, 0.01, 1.0),
    (100, 0.05, 0.5),
]


@pytest.mark.parametrize(("deltas", "every", "interval"), PACING)
def test_streamed_text_is_edited_at_most_once_per_edit_interval_and_ends_complete(
    deltas: int, every: float, interval: float
) -> None:
    session = Session(PlatformLimits(edit_interval=interval))
    session.feed(RunStarted(), start())
    began = session.now
    pieces = [f"tok{n} " for n in range(deltas)]
    for n, piece in enumerate(pieces):
        session.feed(delta(piece), step=every)
        if n % 250 == 0:
            session.tick(0)  # the conversation ticks every 0.25 s
    session.feed(end("".join(pieces)), step=every)
    duration = session.now - began
    text_slots = session.chat.slots("text:")
    for slot in text_slots:
        assert session.chat.ops[slot] <= duration / interval + 2
    shown = " ".join(session.chat.text(s) for s in text_slots)
    assert shown.split() == "".join(pieces).split()


def test_held_back_text_is_shown_by_the_next_tick_once_the_interval_has_passed() -> None:
    session = Session()
    session.feed(RunStarted(), start(), delta("Hello"))
    session.feed(delta(" world"), step=0.1)
    assert session.chat.text("text:1:1:0") == "Hello"
    assert session.tick(0.2) == []
    session.tick(1.0)
    assert session.chat.text("text:1:1:0") == "Hello world"


def test_the_live_status_is_edited_at_most_every_five_seconds() -> None:
    session = Session()
    session.feed(RunStarted(), event(type="agent_start"))
    ticks = [session.tick(0.25) for _ in range(80)]  # 20 s of ticks
    edits = [op for ops in ticks for op in ops]
    assert len(edits) == 4
    assert session.chat.text("status:1").startswith("⏳ working… · 20 s")
    # The clock may wait for spare edit budget; the run's end may not.
    assert all(isinstance(op, Edit) and op.routine for op in edits)
    (final,) = session.feed(event(type="agent_end", messages=[]), RunEnded())
    assert isinstance(final, Edit)
    assert not final.routine


# --- long text ----------------------------------------------------------------------------------


def test_text_over_the_platform_limit_continues_in_a_second_message() -> None:
    session = Session(PlatformLimits(max_text=100))
    text = "\n\n".join(f"Paragraph {n} " + "word " * 10 for n in range(5))
    one_run(session, *answer(text))
    slots = session.chat.slots("text:")
    assert slots == [f"text:1:1:{i}" for i in range(len(slots))]
    assert len(slots) >= 2
    assert all(len(session.chat.text(s)) <= 100 for s in slots)
    assert " ".join(session.chat.text(s) for s in slots).split() == text.split()


def test_a_chunk_that_disappears_from_the_final_text_is_deleted() -> None:
    session = Session(PlatformLimits(max_text=50))
    session.feed(RunStarted(), start(), delta("x" * 120))
    assert len(session.chat.slots("text:")) == 3
    session.feed(end("short final answer"))
    assert session.chat.slots("text:") == ["text:1:1:0"]
    assert session.chat.text("text:1:1:0") == "short final answer"


def test_each_assistant_message_of_a_run_gets_its_own_text_messages() -> None:
    session = Session()
    one_run(
        session,
        *answer("Let me look."),
        tool_start("c1", command="ls"),
        tool_end("c1", "a\nb"),
        *answer("Found two files."),
    )
    assert shown_texts(session.chat) == ["Let me look.", "Found two files."]
    assert session.chat.order.index("tool:c1") < session.chat.order.index("text:1:2:0")


def test_thinking_is_not_shown_and_a_message_without_text_makes_no_message() -> None:
    session = Session()
    thinking = {"type": "thinking_delta", "contentIndex": 0, "delta": "hmm"}
    one_run(
        session,
        start(),
        event(type="message_update", assistantMessageEvent=thinking),
        end(stop="toolUse"),
    )
    assert session.chat.slots("text:") == []


def test_text_blocks_around_a_tool_call_are_shown_as_paragraphs() -> None:
    session = Session()
    session.feed(RunStarted(), start(), delta("First.", 0), delta("Second.", 2))
    session.tick(2)
    assert session.chat.text("text:1:1:0") == "First.\n\nSecond."


# --- buttons ------------------------------------------------------------------------------------

DIALOGS: list[tuple[dict[str, Any], list[str], list[DialogChoice]]] = [
    (
        {"method": "select", "title": "Pick", "options": ["A", "B"]},
        ["A", "B", "✖ Cancel"],
        [
            DialogChoice("req-1", "A", value="A"),
            DialogChoice("req-1", "B", value="B"),
            DialogChoice("req-1", "Cancel", cancelled=True),
        ],
    ),
    (
        {"method": "confirm", "title": "Proceed?", "message": "Really?"},
        ["Yes", "No"],
        [
            DialogChoice("req-1", "Yes", confirmed=True),
            DialogChoice("req-1", "No", confirmed=False),
        ],
    ),
    (
        {"method": "input", "title": "Your name?", "placeholder": "Alice"},
        ["✍️ Answer", "✖ Cancel"],
        [
            DialogChoice("req-1", "Answer", form=Form("Your name?", placeholder="Alice")),
            DialogChoice("req-1", "Cancel", cancelled=True),
        ],
    ),
    (
        {"method": "editor", "title": "Edit", "prefill": "line 1\nline 2"},
        ["✍️ Answer", "✖ Cancel"],
        [
            DialogChoice(
                "req-1", "Answer", form=Form("Edit", prefill="line 1\nline 2", multiline=True)
            ),
            DialogChoice("req-1", "Cancel", cancelled=True),
        ],
    ),
]


@pytest.mark.parametrize(
    ("request_fields", "labels", "choices"), DIALOGS, ids=[d[0]["method"] for d in DIALOGS]
)
def test_dialog_buttons_map_back_to_their_choices_until_the_dialog_closes(
    request_fields: dict[str, Any], labels: list[str], choices: list[DialogChoice]
) -> None:
    session = Session()
    session.feed(ui(**request_fields))
    tokens = session.chat.tokens("dialog:req-1")
    assert session.chat.labels("dialog:req-1") == labels
    assert [session.renderer.pressed(t) for t in tokens] == choices
    assert session.renderer.dialog_tokens("req-1") == list(zip(tokens, choices, strict=True))
    session.do(session.renderer.close_dialog("req-1", "✅ alice chose: A"))
    assert session.chat.messages["dialog:req-1"].buttons == ()
    assert session.chat.text("dialog:req-1").endswith("✅ alice chose: A")
    assert [session.renderer.pressed(t) for t in tokens] == [None] * len(tokens)
    assert session.renderer.dialog_tokens("req-1") == []
    assert session.renderer.close_dialog("req-1", "again") == []


@pytest.mark.parametrize(
    ("method", "wants_reply"),
    [("select", False), ("confirm", False), ("input", True), ("editor", True)],
)
def test_input_and_editor_dialogs_take_a_reply_to_their_message(
    method: str, wants_reply: bool
) -> None:
    session = Session()
    session.feed(ui(method, title="T", options=["x"]))
    assert session.renderer.dialog_slot("req-1") == "dialog:req-1"
    # Buttons, not ForceReply: Telegram allows only one of them on a message.
    assert session.chat.messages["dialog:req-1"].force_reply is False
    assert session.renderer.questions.input_dialogs() == (["req-1"] if wants_reply else [])
    targets = {"dialog:req-1": "req-1"} if wants_reply else {}
    assert session.renderer.reply_targets() == targets
    session.do(session.renderer.close_dialog("req-1", "done"))
    assert session.renderer.dialog_slot("req-1") is None
    assert session.renderer.questions.input_dialogs() == []
    assert session.renderer.reply_targets() == {}


def test_only_the_answer_button_of_an_input_dialog_carries_a_form() -> None:
    session = Session()
    session.feed(ui("input", title="Branch name?", placeholder="main"))
    [answer, cancel] = [b for row in session.chat.messages["dialog:req-1"].buttons for b in row]
    assert answer.form == Form("Branch name?", placeholder="main")
    assert cancel.form is None


ASK_REPLY: list[tuple[str, str, bool]] = [
    ("input", "Your name?", True),
    ("editor", "Edit", True),
    ("select", "Pick", False),
    ("confirm", "Sure?", False),
]


@pytest.mark.parametrize(("method", "title", "asks"), ASK_REPLY)
def test_answer_without_a_form_posts_a_force_reply_message_that_answers_too(
    method: str, title: str, asks: bool
) -> None:
    session = Session()
    session.feed(ui(method, title=title, options=["x"]))
    ops = session.do(session.renderer.ask_reply("req-1", "42"))
    if not asks:
        assert ops == []
        assert session.renderer.awaiting_answers() == {}
        return
    prompt = session.chat.messages["reply:req-1"]
    assert prompt.force_reply is True
    assert prompt.text.startswith("✍️ Reply to this message with your answer")
    assert title in prompt.text
    assert session.renderer.reply_targets() == {"dialog:req-1": "req-1", "reply:req-1": "req-1"}
    assert session.renderer.awaiting_answers() == {"42": "req-1"}
    # A second press (by an approver) moves the waiting, without a second message.
    assert session.do(session.renderer.ask_reply("req-1", "7")) == []
    assert session.renderer.awaiting_answers() == {"7": "req-1"}
    session.do(session.renderer.close_dialog("req-1", "✅ alice chose: x"))
    assert session.chat.text("reply:req-1").endswith("✅ alice chose: x")
    assert session.renderer.reply_targets() == {}
    assert session.renderer.awaiting_answers() == {}


def test_answer_on_a_closed_dialog_asks_for_nothing() -> None:
    session = Session()
    session.feed(ui("input", title="Name?"))
    session.do(session.renderer.close_dialog("req-1", "done"))
    assert session.renderer.ask_reply("req-1", "42") == []


def test_an_editor_dialog_shows_its_prefill_in_a_code_block() -> None:
    session = Session()
    session.feed(ui("editor", title="Edit text", prefill="prefill\nline2"))
    text = session.chat.text("dialog:req-1")
    assert text.startswith("✍️ Edit text — press ✍️ Answer to reply")
    assert "```\nprefill\nline2\n```" in text


def test_a_dialog_with_a_timeout_says_when_it_expires_and_closes_on_expiry() -> None:
    session = Session()
    request = ui("select", title="Pick", options=["A"], timeout=30000)
    session.feed(request)
    assert "expires in 30 s" in session.chat.text("dialog:req-1")
    assert isinstance(request, SelectRequest)
    session.feed(DialogExpired(PendingDialog(request, 0.0, 30.0)))
    assert session.chat.text("dialog:req-1").endswith(
        "⌛ expired — the agent went on without an answer"
    )
    assert session.chat.messages["dialog:req-1"].buttons == ()


def test_a_dialog_the_bridge_cancelled_says_how_long_it_waited() -> None:
    session = Session()
    request = ui("select", title="Pick", options=["A"])
    session.feed(request)
    assert isinstance(request, SelectRequest)
    session.feed(DialogExpired(PendingDialog(request, 0.0, 1800.0, cancel_at_deadline=True)))
    assert session.chat.text("dialog:req-1").endswith("⌛ No answer in 30 min — cancelled.")
    assert session.chat.messages["dialog:req-1"].buttons == ()


# --- pickers: the bridge's own questions, in the same token book ------------------------------


def test_a_picker_press_resolves_once_and_its_buttons_retire_when_it_closes() -> None:
    session = Session(PlatformLimits(max_buttons_per_row=2))
    ops = session.do(
        session.renderer.pick(
            "thinking",
            "Thinking level:",
            [PickerOption(level, level) for level in ("low", "high", "off")],
            2,
        )
    )
    (slot,) = session.chat.order
    assert [len(row) for row in session.chat.messages[slot].buttons] == [2, 1]
    low, high, _ = session.chat.tokens(slot)
    assert session.renderer.pressed(high) == PickerChoice(
        "thinking", "high", slot.split(":")[1], "✓ high"
    )
    assert ops
    assert session.renderer.has_questions()
    choice = session.renderer.pressed(high)
    assert isinstance(choice, PickerChoice)
    session.do(session.renderer.close_picker(choice.picker_id, choice.outcome))
    assert session.chat.text(slot) == "Thinking level:\n\n✓ high"
    assert session.chat.messages[slot].buttons == ()
    assert session.renderer.pressed(low) is None  # retired with its picker
    assert not session.renderer.has_questions()


LONG_LABEL = "fix the flaky build, then the docs, then the release notes"


@pytest.mark.parametrize(
    ("option", "button", "closing"),
    [
        (PickerOption("compact", "compact"), "compact", "✓ compact"),
        (PickerOption("🚫 `npm test`", "revoke command:npm test", "🚫 Revoked: `npm test`"),
         "🚫 `npm test`", "🚫 Revoked: `npm test`"),
        (PickerOption(LONG_LABEL, "entry-7f3a"), "fix the flaky build, then the docs, the…",
         f"✓ {LONG_LABEL}"),
    ],
    ids=["label", "outcome given", "long label"],
)  # fmt: skip
def test_a_pressed_picker_says_its_outcome_or_the_whole_label_never_the_value(
    option: PickerOption, button: str, closing: str
) -> None:
    session = Session()
    session.do(session.renderer.pick("kind", "Pick:", [option], 1))
    (slot,) = session.chat.order
    assert session.chat.labels(slot) == [button]
    choice = session.renderer.pressed(session.chat.tokens(slot)[0])
    assert isinstance(choice, PickerChoice)
    assert choice.value == option.value
    session.do(session.renderer.close_picker(choice.picker_id, choice.outcome))
    assert session.chat.text(slot) == f"Pick:\n\n{closing}"


def test_pickers_close_with_the_other_questions_and_on_interrupt() -> None:
    session = Session()
    session.do(session.renderer.pick("model", "Pick a model:", [PickerOption("a/b", "a/b")], 1))
    session.do(session.renderer.pick("policy", "Policy:", [PickerOption("ask", "ask")], 1))
    first, second = session.chat.order
    (token,) = session.chat.tokens(first)
    session.do(session.renderer.close_questions("✖ no longer active"))
    assert session.chat.text(first).endswith("✖ no longer active")
    assert session.renderer.pressed(token) is None
    session.do(session.renderer.pick("verbose", "Show:", [PickerOption("all", "all")], 1))
    third = session.chat.order[-1]
    (token,) = session.chat.tokens(third)
    session.do(session.renderer.interrupt("agent stopped"))
    assert session.renderer.pressed(token) is None
    assert second != third


def test_a_picker_token_over_the_platforms_button_data_limit_is_refused() -> None:
    renderer = Renderer(
        limits=PlatformLimits(max_button_data=8), formatter=formatter, tokens=lambda: "x" * 9
    )
    with pytest.raises(ValueError, match="exceeds the platform's 8"):
        renderer.pick("model", "Pick a model:", [PickerOption("a/b", "a/b")], 1)


def test_many_options_are_laid_out_in_rows_with_cancel_on_its_own() -> None:
    session = Session(PlatformLimits(max_buttons_per_row=3))
    session.feed(ui("select", title="Pick", options=[str(n) for n in range(7)]))
    rows = session.chat.messages["dialog:req-1"].buttons
    assert [len(r) for r in rows] == [3, 3, 1, 1]
    assert rows[-1][0].label == "✖ Cancel"


def test_the_stop_button_means_stop_while_its_run_lives() -> None:
    session = Session()
    session.feed(RunStarted())
    assert session.chat.messages["status:1"].silent
    [stop] = session.chat.tokens("status:1")
    assert session.renderer.pressed(stop) == StopChoice()
    one_run(session)
    assert session.renderer.pressed(stop) is None


def test_the_busy_question_offers_steer_now_or_after_this_run() -> None:
    session = Session()
    session.do(session.renderer.ask_busy("p1", "fix the tests too"))
    assert "fix the tests too" in session.chat.text("busy:p1")
    steer, later = session.chat.tokens("busy:p1")
    assert session.renderer.pressed(steer) == BusyChoice("steer", "p1")
    assert session.renderer.pressed(later) == BusyChoice("follow_up", "p1")
    session.do(session.renderer.close_busy("p1", "➡️ sent now"))
    assert session.chat.text("busy:p1").endswith("➡️ sent now")
    assert session.renderer.pressed(steer) is None


def test_unknown_tokens_mean_nothing_and_oversized_tokens_are_refused() -> None:
    assert Session().renderer.pressed("nope") is None
    session = Session(PlatformLimits(max_button_data=3))
    with pytest.raises(ValueError, match="bytes"):
        session.feed(RunStarted())


# --- tools by verbosity -------------------------------------------------------------------------

VERBOSITY: list[tuple[Verbosity, list[str], list[str]]] = [
    ("all", ["tool:c1", "tool:c2"], []),
    ("compact", [], ["tools:1"]),
    ("off", [], []),
]


@pytest.mark.parametrize(("verbosity", "tool_slots", "list_slots"), VERBOSITY)
def test_tools_are_shown_by_verbosity(
    verbosity: Verbosity, tool_slots: list[str], list_slots: list[str]
) -> None:
    session = Session(settings=ConversationSettings(verbosity=verbosity))
    one_run(
        session,
        tool_start("c1", command="ls -la"),
        tool_end("c1", "ok"),
        tool_start("c2", "read", path="src/app.py"),
        tool_end("c2", "boom", name="read", error=True),
    )
    assert session.chat.slots("tool:") == tool_slots
    assert session.chat.slots("tools:") == list_slots
    assert "2 tools" in session.chat.text("status:1")


def test_the_compact_view_lists_each_tool_with_its_outcome_in_one_message() -> None:
    session = Session(settings=ConversationSettings(verbosity="compact"))
    one_run(
        session,
        tool_start("c1", command="ls -la"),
        tool_end("c1", "ok"),
        tool_start("c2", "read", path="src/app.py"),
        tool_end("c2", "boom", name="read", error=True),
    )
    lines = session.chat.text("tools:1").split("\n")
    assert lines[0].startswith("🔧 bash  `ls -la` ✅")
    assert lines[1].startswith("🔧 read  `src/app.py` ❌")


def test_a_verbosity_change_applies_to_tools_that_start_after_it() -> None:
    session = Session()
    session.feed(RunStarted(), tool_start("c1", command="sleep 1"))
    session.renderer.settings = ConversationSettings(verbosity="off")
    session.feed(tool_end("c1", "done"), tool_start("c2", command="ls"), tool_end("c2", "x"))
    assert session.chat.slots("tool:") == ["tool:c1"]
    assert session.chat.text("tool:c1").startswith("✅ bash")


@pytest.mark.parametrize(
    ("name", "args", "summary"),
    [
        ("bash", {"command": "ls -la"}, "🔧 bash  `ls -la`"),
        ("bash", {"command": "echo a\necho b"}, "🔧 bash  `echo a …`"),
        ("read", {"path": "a/b.py"}, "🔧 read  `a/b.py`"),
        ("edit", {"path": "x.md", "oldText": "a"}, "🔧 edit  `x.md`"),
        ("grep", {"pattern": "TODO"}, '🔧 grep  `{"pattern":"TODO"}`'),
        ("web", {"q": "x" * 500}, None),
        ("noargs", {}, "🔧 noargs"),
    ],
)
def test_a_tool_message_opens_with_a_one_line_summary_of_its_arguments(
    name: str, args: dict[str, Any], summary: str | None
) -> None:
    session = Session()
    session.feed(tool_start("c1", name, **args))
    text = session.chat.text("tool:c1")
    assert "\n" not in text
    assert session.chat.messages["tool:c1"].silent
    if summary is None:
        assert len(text) < 230
        assert text.endswith("…`")
    else:
        assert text == summary


def test_tool_output_shows_the_tail_of_the_cumulative_partial_result() -> None:
    session = Session(tool_output_lines=3)
    session.feed(RunStarted(), tool_start("c1", command="make"))
    lines = [f"line {n}" for n in range(10)]
    for n in range(1, 11):
        session.feed(tool_update("c1", "\n".join(lines[:n]) + "\n"), step=0.6)
    session.tick(2)
    text = session.chat.text("tool:c1")
    assert text.endswith("```\n… 7 more lines\nline 7\nline 8\nline 9\n```")
    assert session.chat.ops["tool:c1"] <= 6 * 1.0 + 2


def test_long_tool_output_is_also_uploaded_as_a_file() -> None:
    session = Session()
    output = "\n".join(f"row {n} " + "x" * 40 for n in range(200))
    one_run(
        session,
        tool_start("call_abcdef123456", command="cat big"),
        tool_end("call_abcdef123456", output),
    )
    upload = session.chat.uploads["toolfile:call_abcdef123456"]
    assert upload.filename == "bash-abcdef12.txt"
    assert upload.data == output.encode()
    text = session.chat.text("tool:call_abcdef123456")
    assert text.startswith("✅ bash  `cat big` · ")
    assert "… 188 more lines\nrow 188 " in text  # the last 12 lines, after a note
    assert text.count("\nrow ") == 12


def test_short_tool_output_is_not_uploaded() -> None:
    session = Session()
    one_run(session, tool_start("c1", command="ls"), tool_end("c1", "a\nb"))
    assert session.chat.uploads == {}


def test_an_update_or_end_for_a_tool_never_started_still_gets_a_message() -> None:
    session = Session()
    session.feed(tool_update("ghost", "partial"), tool_end("phantom", "fine", error=True))
    assert session.chat.text("tool:ghost").startswith("🔧 bash")
    assert session.chat.text("tool:phantom").startswith("❌ bash")


def test_a_tool_cut_off_by_the_end_of_its_run_says_so() -> None:
    session = Session()
    one_run(session, tool_start("c1", command="sleep 100"))
    assert session.chat.text("tool:c1").startswith("⚠️ bash")
    assert "cut off" in session.chat.text("tool:c1")


# --- notices and status lines ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "icon"),
    [("info", "ℹ️"), ("warning", "⚠️"), ("error", "❌"), ("odd", "ℹ️")],  # noqa: RUF001
)
def test_notifications_are_messages_marked_by_level(level: str, icon: str) -> None:
    session = Session()
    session.feed(ui("notify", message="hello", notifyType=level))
    assert session.chat.text("notice:0+1") == f"{icon} hello"  # the first before any run


FIRE_AND_FORGET = [
    (ui("set_editor_text", text="draft"), "✏️ suggested text:\n```\ndraft\n```"),
    (
        event(type="extension_error", extensionPath="/x/gate.ts", event="tool_call", error="bad"),
        "⚠️ extension error (gate.ts, tool_call): bad",
    ),
    (event(type="error", error="Unexpected token"), "⚠️ Unexpected token"),
]


@pytest.mark.parametrize(
    ("item", "text"), FIRE_AND_FORGET, ids=["editor text", "extension error", "legacy error"]
)
def test_fire_and_forget_events_become_standalone_messages(item: AgentEvent, text: str) -> None:
    session = Session()
    session.feed(item)
    assert [session.chat.text(s) for s in session.chat.slots("notice:")] == [text]


@pytest.mark.parametrize(
    "item",
    [
        ui("setTitle", title="probe title"),
        event(type="what_is_this", x=1),
        OrphanResponse(Response(type="response", command="parse", error="bad")),
        event(type="session_info_changed", name="n"),
        event(type="turn_start"),
        MalformedRecord("not JSON", "{"),
    ],
    ids=["setTitle", "unknown event", "orphan response", "session info", "turn start", "malformed"],
)
def test_events_with_nothing_to_show_make_no_ops(item: AgentEvent) -> None:
    assert Session().feed(item) == []


def test_an_unknown_event_type_decodes_as_unknown_and_is_ignored() -> None:
    item = event(type="brand_new", payload={"a": 1})
    assert isinstance(item, UnknownEvent)


def test_status_lines_show_extension_status_widgets_and_queue_until_cleared() -> None:
    session = Session()
    session.feed(
        RunStarted(),
        ui("setStatus", id="s1", statusKey="probe", statusText="probing..."),
        ui("setWidget", id="w1", widgetKey="probe", widgetLines=["line 1", "line 2"]),
        event(type="queue_update", steering=["a"], followUp=["b", "c"]),
        tool_start("c1", command="ls -la"),
    )
    session.tick(5)
    lines = session.chat.text("status:1").split("\n")
    assert lines[1:] == [
        "🔧 bash ls -la",
        "queued: 1 steer, 2 follow-ups",
        "probing...",
        "line 1",
        "line 2",
    ]
    session.feed(
        ui("setStatus", id="s2", statusKey="probe"), ui("setWidget", id="w2", widgetKey="probe")
    )
    session.feed(event(type="queue_update", steering=[], followUp=[]), tool_end("c1"))
    session.tick(5)
    assert session.chat.text("status:1").split("\n")[1:] == []


def test_retry_and_compaction_show_in_the_live_status() -> None:
    session = Session()
    session.feed(
        RunStarted(),
        event(
            type="auto_retry_start",
            attempt=1,
            maxAttempts=3,
            delayMs=2000,
            errorMessage="overloaded",
        ),
        event(type="compaction_start", reason="overflow"),
    )
    session.tick(5)
    assert session.chat.text("status:1").split("\n")[1:] == [
        "↻ retrying 1/3 in 2 s: overloaded",
        "🗜 compacting…",
    ]
    session.feed(event(type="agent_start"), event(type="compaction_end", reason="overflow"))
    session.tick(5)
    assert session.chat.text("status:1").split("\n")[1:] == []


def test_compaction_outside_a_run_is_a_message_unless_a_command_asked_for_it() -> None:
    session = Session()
    session.feed(
        event(type="compaction_start", reason="manual"),
        event(type="compaction_end", reason="manual"),
    )
    assert session.chat.messages == {}
    session.feed(event(type="compaction_start", reason="threshold"))
    session.feed(event(type="compaction_end", reason="threshold"))
    assert session.chat.text("compaction:0+1") == "🗜 context compacted"
    session.feed(event(type="compaction_end", reason="overflow", errorMessage="Nothing to compact"))
    assert session.chat.text("compaction:0+2") == "⚠️ compaction failed: Nothing to compact"


RUN_ENDS = [
    ([end("ok", cost=0.0123)], "✅ done · ", "$0.01"),
    ([end("ok")], "✅ done · ", None),
    ([end("", stop="error", error="500 overloaded")], "⚠️ failed · ", ": 500 overloaded"),
    ([end("partial", stop="aborted", error="Request was aborted")], "⏹ stopped · ", None),
    ([end("", stop="error", error="This operation was aborted")], "⏹ stopped · ", None),
]


@pytest.mark.parametrize(
    ("events", "prefix", "suffix"),
    RUN_ENDS,
    ids=["cost", "free", "error", "aborted", "aborted as error"],
)
def test_the_status_of_an_ended_run_says_how_it_ended(
    events: list[AgentEvent], prefix: str, suffix: str | None
) -> None:
    session = Session()
    one_run(session, start(), *events)
    status = session.chat.text("status:1")
    assert status.startswith(prefix)
    assert session.chat.messages["status:1"].buttons == ()
    if suffix is not None:
        assert status.endswith(suffix)
    else:
        assert "$" not in status


def test_a_run_with_no_agent_loop_removes_its_status_message() -> None:
    session = Session()
    session.feed(RunStarted(), ui("notify", message="named"), RunEnded())
    assert session.chat.slots("status:") == []
    assert session.chat.slots("notice:") == ["notice:1.1"]  # the first in run 1


def test_a_failed_model_call_outside_a_run_is_a_notice() -> None:
    session = Session()
    session.feed(*answer("", stop="error", error="401 no key"))
    assert session.chat.text("notice:0+1") == "⚠️ 401 no key"


def test_a_repeated_run_started_signal_keeps_the_live_run() -> None:
    session = Session()
    session.feed(RunStarted(), event(type="agent_start"), RunStarted(), *answer("hi"))
    session.feed(event(type="agent_end"), RunEnded())
    assert session.chat.slots("status:") == ["status:1"]
    assert session.chat.text("status:1").startswith("✅ done")


def test_a_notice_is_plain_unless_asked_for_markdown_and_long_ones_are_split() -> None:
    session = Session(PlatformLimits(max_text=40))
    session.do(session.renderer.notice("*not bold*"))
    assert session.chat.messages[session.chat.slots("notice:")[0]].plain == ""
    session.do(
        session.renderer.notice("para one is here\n\npara two is here too\n\nthree", markdown=True)
    )
    assert [session.chat.text(s) for s in session.chat.slots("notice:")][1:] == [
        "para one is here\n\npara two is here too",
        "three",
    ]


# --- interruption ---------------------------------------------------------------------------


def test_the_agent_exiting_mid_run_interrupts_the_status_and_retires_every_button() -> None:
    session = Session()
    session.feed(RunStarted(), event(type="agent_start"), start(), delta("half an ans"))
    session.feed(tool_start("c1", command="sleep 9"), ui("confirm", title="Go?"))
    stop = session.chat.tokens("status:1")[0]
    yes = session.chat.tokens("dialog:req-1")[0]
    session.feed(RunEnded(), AgentGone(1, "boom"))
    assert session.chat.text("status:1").startswith("⚠️ interrupted · ")
    assert session.chat.text("status:1").endswith(": agent stopped (exit 1)")
    assert session.chat.text("dialog:req-1").endswith("✖ agent stopped (exit 1)")
    assert session.chat.text("text:1:1:0") == "half an ans"
    assert session.chat.text("tool:c1").startswith("⚠️ bash")
    assert session.renderer.pressed(stop) is None
    assert session.renderer.pressed(yes) is None
    assert all(m.buttons == () for m in session.chat.messages.values())


def test_an_idle_agent_exiting_shows_nothing() -> None:
    session = Session()
    one_run(session, *answer("done"))
    assert session.feed(AgentGone(0, "")) == []


def test_a_bridge_interrupt_finishes_the_live_run_with_its_reason() -> None:
    session = Session()
    session.feed(RunStarted(), event(type="agent_start"))
    session.do(session.renderer.ask_busy("p1", "later"))
    session.do(session.renderer.interrupt("interrupted by restart"))
    assert session.chat.text("status:1").endswith(": interrupted by restart")
    assert session.chat.text("busy:p1").endswith("✖ interrupted by restart")
    assert all(m.buttons == () for m in session.chat.messages.values())
    assert session.renderer.tick(session.now + 10) == []


def test_the_tool_result_type_accepts_a_legacy_error_string() -> None:
    session = Session()
    item = event(
        type="tool_execution_end", toolCallId="c1", toolName="bash", result="ENOENT", isError=True
    )
    assert isinstance(item, ToolExecutionEnd)
    assert not isinstance(item.result, ToolResult)
    session.feed(item)
    assert "ENOENT" in session.chat.text("tool:c1")


# --- reactions on the user's message -------------------------------------------------------


def reactions(ops: list[Op]) -> list[tuple[str, str]]:
    return [(op.message_id, op.state) for op in ops if isinstance(op, React)]


def _loop(*events: AgentEvent) -> list[AgentEvent]:
    return [RunStarted(), event(type="agent_start"), start(), *events]


def _closed(*events: AgentEvent) -> list[AgentEvent]:
    return [*_loop(*events), event(type="agent_end", messages=[]), RunEnded()]


REACTIONS: list[tuple[str, list[AgentEvent], bool, str | None]] = [
    ("an answered run is done", _closed(end("ok")), False, "done"),
    ("a model error is failed", _closed(end("", stop="error", error="500")), False, "failed"),
    ("a stop is done", _closed(end("x", stop="aborted", error="aborted")), False, "done"),
    ("an abort for time is failed", _closed(end("x", stop="aborted")), True, "failed"),
    (
        "an extension command without a loop is done",
        [RunStarted(), ui("notify", message="hi"), RunEnded()],
        False,
        "done",
    ),
    ("an agent that dies mid-run is failed", [*_loop(), AgentGone(1, "")], False, "failed"),
    ("a prompt that never started a run is failed", [AgentGone(1, "")], False, "failed"),
    ("a run still going stays working", _loop(), False, None),
]


@pytest.mark.parametrize(
    ("events", "overtime", "final"), [r[1:] for r in REACTIONS], ids=[r[0] for r in REACTIONS]
)
def test_the_users_message_is_marked_working_then_how_its_run_ended(
    events: list[AgentEvent], overtime: bool, final: str | None
) -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    for item in events:
        ops += session.feed(item)
        if overtime and isinstance(item, RunStarted):
            session.renderer.overtime()
    expected = [("m1", "working")] + ([("m1", final)] if final else [])
    assert reactions(ops) == expected


def user(text: str) -> AgentEvent:
    """The agent taking a user message into its context (a prompt, steer or follow-up)."""
    return event(type="message_start", message={"role": "user", "content": text})


@pytest.mark.parametrize(
    ("events", "overtime", "final"), [r[1:] for r in REACTIONS], ids=[r[0] for r in REACTIONS]
)
def test_messages_the_agent_took_into_a_run_are_marked_as_the_run_ends(
    events: list[AgentEvent], overtime: bool, final: str | None
) -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    ops += session.do(session.renderer.joined("s1", "one"))  # before the run had started
    loop = any(isinstance(item, AgentStart) for item in events)
    for item in events:
        ops += session.feed(item)
        if isinstance(item, RunStarted):
            if overtime:
                session.renderer.overtime()
            ops += session.do(session.renderer.joined("s2", "two"))
        if isinstance(item, AgentStart):
            ops += session.feed(user("one"), user("two"))  # the agent had both
    marked: dict[str, list[str]] = {}
    for message, state in reactions(ops):
        marked.setdefault(message, []).append(state)
    started = any(isinstance(item, RunStarted) for item in events)
    expected = {"m1": ["working", final] if final else ["working"]}
    # Without an agent loop (an extension command) nothing took them: they ride on,
    # unless the agent is gone.
    gone = any(isinstance(item, AgentGone) for item in events)
    for rider in ("s1", "s2") if started else ("s1",):
        expected[rider] = ["working", final] if final and (loop or gone) else ["working"]
    assert marked == expected


def stopped_run(session: Session, *riders: tuple[str, str], follow_ups: list[str]) -> list[Op]:
    """A run that `riders` joined, stopped while the agent's follow-up queue held
    `follow_ups` (and nothing took the riders in)."""
    ops = session.feed(RunStarted(), event(type="agent_start"), start())
    for message_id, text in riders:
        ops += session.do(session.renderer.joined(message_id, text))
    ops += session.feed(event(type="queue_update", steering=[], followUp=follow_ups))
    ops += session.feed(end("", stop="aborted", error="aborted"))
    return ops + session.feed(event(type="agent_end", messages=[]), RunEnded())


def test_messages_a_stopped_run_never_took_ride_on_and_are_named_after_a_second_miss() -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    ops += stopped_run(session, ("s1", "  STEER  "), ("f1", "LATER"), follow_ups=["LATER"])
    ops += session.do(session.renderer.joined(None, "no id"))  # nothing to mark
    # A stop is the user's choice; the others may still be taken in by the next run.
    assert reactions(ops) == [
        ("m1", "working"),
        ("s1", "working"),
        ("f1", "working"),
        ("m1", "done"),
    ]
    assert session.chat.slots("notice:") == []
    # The next run takes the follow-up in, not the steer: that one is given up now.
    ops = session.do(session.renderer.working_on("m2"))
    ops += session.feed(RunStarted(), user("next"), user("LATER"))
    ops += session.feed(event(type="queue_update", steering=[], followUp=[]))
    ops += session.feed(*_closed(end("both done"))[1:])
    assert reactions(ops) == [("m2", "working"), ("m2", "done"), ("s1", "failed"), ("f1", "done")]
    notices = [session.chat.text(slot) for slot in session.chat.slots("notice:")]
    assert notices == ["⚠️ Not delivered to the agent: “STEER”"]


def test_a_steer_the_agent_kept_past_a_stop_is_marked_by_the_run_that_took_it() -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    ops += stopped_run(session, ("s1", "STEER"), follow_ups=[])
    ops += session.do(session.renderer.working_on("m2"))
    ops += session.feed(RunStarted(), user("next"), user("STEER"), *_closed(end("ok"))[1:])
    assert reactions(ops)[-2:] == [("m2", "done"), ("s1", "done")]
    assert session.chat.slots("notice:") == []


def test_a_follow_up_still_queued_is_never_given_up_while_the_agent_holds_it() -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    ops += stopped_run(session, ("f1", "LATER"), follow_ups=["LATER"])
    ops += stopped_run(session, follow_ups=["LATER"])
    ops += stopped_run(session, follow_ups=["LATER"])
    assert ("f1", "failed") not in reactions(ops)


def test_a_rider_is_heard_once_in_order_and_in_any_content_shape() -> None:
    riders = Riders()
    riders.join("a", "same")
    riders.join("b", "same")
    riders.join("c", "pic")
    image = {"type": "image", "data": "", "mimeType": "image/png"}
    blocks = [image, {"type": "text", "text": "pic"}]
    riders.heard(UserMessage.model_validate({"role": "user", "content": "same"}))
    riders.heard(UserMessage.model_validate({"role": "user", "content": blocks}))
    marks, lost = riders.end("done")
    assert (reactions(marks), lost) == ([("a", "done"), ("c", "done")], [])
    marks, lost = riders.end("done")  # the second run without it
    assert (reactions(marks), lost) == ([("b", "failed")], ["same"])
    assert riders.fail_all() == []


def test_a_dead_agent_fails_every_rider_delivered_or_kept() -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    ops += session.feed(RunStarted(), event(type="agent_start"), user("go"))
    ops += session.do(session.renderer.joined("s1", "heard"))
    ops += session.do(session.renderer.joined("f1", "queued"))
    ops += session.feed(user("heard"), event(type="queue_update", followUp=["queued"]))
    ops += session.feed(AgentGone(137, ""))
    assert sorted(reactions(ops)[3:]) == [("f1", "failed"), ("m1", "failed"), ("s1", "failed")]


def test_only_the_run_a_message_started_marks_it() -> None:
    session = Session()
    ops = session.do(session.renderer.working_on(None))  # a queued follow-up: no message
    ops += session.feed(*_closed(end("first")))
    ops += session.do(session.renderer.working_on("m2"))
    ops += session.feed(*_closed(end("second")), *_closed(end("third")))
    assert reactions(ops) == [("m2", "working"), ("m2", "done")]


def test_a_prompt_that_failed_to_send_is_marked_failed_once() -> None:
    session = Session()
    ops = session.do(session.renderer.working_on("m1"))
    ops += session.do(session.renderer.not_started())
    ops += session.do(session.renderer.not_started())
    assert reactions(ops) == [("m1", "working"), ("m1", "failed")]

"""Routing table: one inbound message and the conversation's state → intent."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from bridge.admission import screen
from bridge.conversation.routing import (
    AskBusy,
    Control,
    DialogReply,
    FollowUp,
    Hold,
    Ignore,
    Intent,
    Press,
    Prompt,
    Steer,
    Stop,
    View,
    parse_command,
    route,
    urgent,
)
from bridge.model import ButtonPress, ChatRef, Image, Inbound, Sender
from tests.support.paths import TRANSCRIPTS

if TYPE_CHECKING:
    from pathlib import Path

IDLE = View()
BUSY = View(busy=True)
PNG = Image(b"\x89PNG", "image/png")


def msg(text: str = "", **kw: object) -> Inbound:
    fields: dict[str, object] = {
        "key": "tg:1",
        "chat": ChatRef("1"),
        "sender": Sender("42", "alice"),
        "event_id": "e1",
        "text": text,
    }
    fields.update(kw)
    return Inbound(**fields)  # type: ignore[arg-type]


ROUTES: list[tuple[str, Inbound, View, Intent]] = [
    ("idle message prompts", msg("hello"), IDLE, Prompt("hello")),
    ("idle photo prompts with image", msg("", images=(PNG,)), IDLE, Prompt("", (PNG,))),
    ("busy message steers by default", msg("use tabs"), BUSY, Steer("use tabs")),
    (
        "busy message follows up by policy",
        msg("then tests"),
        View(busy=True, policy="follow_up"),
        FollowUp("then tests"),
    ),
    ("busy message asks by policy", msg("hm"), View(busy=True, policy="ask"), AskBusy("hm")),
    ("double chevron follows up", msg(">> run tests"), BUSY, FollowUp("run tests")),
    ("double chevron while idle prompts", msg(">> run tests"), IDLE, Prompt("run tests")),
    ("later command follows up", msg("/later lint it"), BUSY, FollowUp("lint it")),
    ("steer command steers", msg("/steer stop that"), BUSY, Steer("stop that")),
    ("steer command while idle prompts", msg("/steer go"), IDLE, Prompt("go")),
    ("stop aborts", msg("/stop"), BUSY, Stop()),
    ("stop with bot mention aborts", msg("/stop@pibot"), View(busy=True, bot_name="PiBot"), Stop()),
    ("bang stop aborts in slack", msg("!stop"), View(prefixes=("/", "!")), Stop()),
    ("bang is text on telegram", msg("!stop"), IDLE, Prompt("!stop")),
    ("control command maps", msg("/model openai/gpt-5"), BUSY, Control("model", "openai/gpt-5")),
    ("help is control", msg("/help"), IDLE, Control("help")),
    ("unknown slash word goes to agent", msg("/review src/"), IDLE, Prompt("/review src/")),
    ("skill goes to agent", msg("/skill:pdf make one"), IDLE, Prompt("/skill:pdf make one")),
    ("unknown slash word while busy steers", msg("/review"), BUSY, Steer("/review")),
    (
        "command for another bot is text",
        msg("/new@otherbot"),
        View(bot_name="pibot"),
        Prompt("/new@otherbot"),
    ),
    ("lone slash is text", msg("/"), IDLE, Prompt("/")),
    ("path is text", msg("/etc/hosts is odd"), IDLE, Prompt("/etc/hosts is odd")),
    (
        "compacting holds a steer",
        msg("more"),
        View(busy=True, compacting=True),
        Hold(Steer("more")),
    ),
    (
        "compacting holds a follow-up",
        msg(">> more"),
        View(busy=True, compacting=True),
        Hold(FollowUp("more")),
    ),
    # Compacting after the run: the message waits, then starts the next run.
    ("compacting idle holds a message", msg("more"), View(compacting=True), Hold(Steer("more"))),
    (
        "compacting idle holds a steer command",
        msg("/steer more"),
        View(compacting=True),
        Hold(Steer("more")),
    ),
    (
        "compacting idle holds a follow-up",
        msg(">> more"),
        View(compacting=True),
        Hold(FollowUp("more")),
    ),
    (
        "compacting holds an ask-policy message without asking",
        msg("more"),
        View(compacting=True, policy="ask"),
        Hold(Steer("more")),
    ),
    ("compacting idle still runs controls", msg("/new"), View(compacting=True), Control("new")),
    ("empty message ignored", msg("   "), IDLE, Ignore("empty message")),
    ("empty follow-up ignored", msg(">>"), BUSY, Ignore("nothing to send")),
    (
        "button press",
        msg(press=ButtonPress("tok", "cb1")),
        BUSY,
        Press("tok", "cb1"),
    ),
    (
        "reply to an input dialog answers it",
        msg("my answer", reply_to="77"),
        View(busy=True, input_dialogs={"77": "req-1"}),
        DialogReply("req-1", "my answer"),
    ),
    ("reply to another message is a message", msg("x", reply_to="5"), BUSY, Steer("x")),
    (
        "press with a typed answer carries it",
        msg(press=ButtonPress("tok", "cb1", text="my answer")),
        BUSY,
        Press("tok", "cb1", "my answer"),
    ),
    (
        "next message of who pressed answer answers",
        msg("feature/x"),
        View(busy=True, awaiting={"42": "req-1"}),
        DialogReply("req-1", "feature/x"),
    ),
    (
        "next message of someone else is a message",
        msg("feature/x"),
        View(busy=True, awaiting={"7": "req-1"}),
        Steer("feature/x"),
    ),
    (
        "a command while an answer is awaited stays a command",
        msg("/stop"),
        View(busy=True, awaiting={"42": "req-1"}),
        Stop(),
    ),
    (
        "an empty message while an answer is awaited is ignored",
        msg(" "),
        View(busy=True, awaiting={"42": "req-1"}),
        Ignore("empty message"),
    ),
    (
        "a reply to a dialog wins over the awaited one",
        msg("a", reply_to="77"),
        View(busy=True, input_dialogs={"77": "req-2"}, awaiting={"42": "req-1"}),
        DialogReply("req-2", "a"),
    ),
    # Scheduled runs (bridge/schedules/): a prompt, or queued behind a run whatever the
    # policy; never a command, never an answer to a question.
    ("scheduled idle prompts", msg("check CI", scheduled="⏰"), IDLE, Prompt("check CI")),
    (
        "scheduled while busy follows up, not steers",
        msg("check CI", scheduled="⏰"),
        BUSY,
        FollowUp("check CI"),
    ),
    (
        "scheduled while busy follows up even under ask",
        msg("check CI", scheduled="⏰"),
        View(busy=True, policy="ask"),
        FollowUp("check CI"),
    ),
    ("scheduled /stop is a prompt", msg("/stop", scheduled="⏰"), IDLE, Prompt("/stop")),
    ("scheduled /new is a prompt", msg("/new", scheduled="⏰"), IDLE, Prompt("/new")),
    (
        "scheduled text answers no awaited question",
        msg("check CI", scheduled="⏰"),
        View(busy=True, awaiting={"42": "req-1"}),
        FollowUp("check CI"),
    ),
    (
        "a missed run's line alone is nothing to send",
        msg("", scheduled="⏰ missed"),
        IDLE,
        Ignore("empty message"),
    ),
]


@pytest.mark.parametrize(
    ("inbound", "view", "expected"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES]
)
def test_an_inbound_routes_to_the_expected_intent(
    inbound: Inbound, view: View, expected: Intent
) -> None:
    assert route(inbound, view) == expected


COMMANDS: list[tuple[str, str, tuple[str, str] | None]] = [
    ("/new", "", ("new", "")),
    ("/New  some   args ", "", ("new", "some   args")),
    ("/new@PiBot x", "pibot", ("new", "x")),
    ("/new@other x", "pibot", None),
    ("/new@any", "", ("new", "")),
    ("/skill:pdf", "", ("skill:pdf", "")),
    ("/1abc", "", None),
    ("/", "", None),
    ("hello", "", None),
]


@pytest.mark.parametrize(("text", "bot", "expected"), COMMANDS)
def test_commands_are_parsed_and_normalised(
    text: str, bot: str, expected: tuple[str, str] | None
) -> None:
    assert parse_command(text, ("/",), bot) == expected


GROUP = frozenset({"S1"})
GATES: list[tuple[str, Inbound, list[str] | None, str | None]] = [
    ("allowed sender passes", msg("hi"), ["42"], None),
    ("everyone allowed when no list", msg("hi"), None, None),
    ("stranger refused", msg("hi", sender=Sender("7")), ["42"], "refuse"),
    ("own message dropped", msg("hi", from_self=True), ["42"], "drop"),
    ("other bot dropped", msg("hi", sender=Sender("9", is_bot=True)), None, "drop"),
    ("edit dropped", msg("hi", is_edit=True), ["42"], "drop"),
    (
        "member of an allowed group passes",
        msg("hi", sender=Sender("7", groups=GROUP)),
        ["S1"],
        None,
    ),
    (
        "member of another group refused",
        msg("hi", sender=Sender("7", groups=GROUP)),
        ["S2"],
        "refuse",
    ),
]


@pytest.mark.parametrize(
    ("inbound", "allowed", "action"), [g[1:] for g in GATES], ids=[g[0] for g in GATES]
)
def test_the_gate_drops_own_messages_and_refuses_strangers(
    inbound: Inbound, allowed: list[str] | None, action: str | None
) -> None:
    gate = screen(inbound, allowed)
    assert (gate.action if gate else None) == action


def _transcript_inputs() -> list[Path]:
    root = TRANSCRIPTS
    return sorted(root.glob("*/d*_steer_*.stdin.jsonl")) + sorted(
        root.glob("*/e1_follow_up.stdin.jsonl")
    )


@pytest.mark.parametrize("stdin", _transcript_inputs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_sessions_are_reproduced_by_routing_their_messages(stdin: Path) -> None:
    """The recorded runs sent prompt, then steer/follow_up while busy: routing the
    same texts as chat messages yields the same commands."""
    sent = [json.loads(line) for line in stdin.read_text().splitlines() if line.strip()]
    messages = [c for c in sent if c.get("type") in ("prompt", "steer", "follow_up")]
    assert messages, "transcript has no message commands"
    busy = False
    for command in messages:
        text = command["message"]
        chat_text = f">> {text}" if command["type"] == "follow_up" else text
        intent = route(msg(chat_text), View(busy=busy))
        expected = {"prompt": Prompt, "steer": Steer, "follow_up": FollowUp}[command["type"]]
        assert type(intent) is expected
        assert getattr(intent, "text", None) == text
        busy = True


URGENT: list[tuple[str, Inbound, Intent | None]] = [
    ("a press", msg(press=ButtonPress("tok", "cb1")), Press("tok", "cb1")),
    ("a typed answer in a form", msg(press=ButtonPress("t", "c", text="x")), Press("t", "c", "x")),
    ("/stop", msg("/stop"), Stop()),
    ("an alias with more words", msg("/cancel that now"), Stop()),
    ("/stop to this bot", msg("/stop@pibot"), Stop()),
    ("/stop to another bot", msg("/stop@otherbot"), None),
    ("a control command waits its turn", msg("/status"), None),
    ("a steer waits its turn", msg("/steer go on"), None),
    ("plain text", msg("stop"), None),
    ("a picture", msg("", images=(PNG,)), None),
]


@pytest.mark.parametrize(
    ("inbound", "expected"), [c[1:] for c in URGENT], ids=[c[0] for c in URGENT]
)
def test_only_presses_and_stops_skip_the_inbox(inbound: Inbound, expected: Intent | None) -> None:
    assert urgent(inbound, ("/",), "pibot") == expected
    if expected is not None:  # and routing it later would have said the same
        assert route(inbound, View(busy=True, bot_name="pibot")) == expected

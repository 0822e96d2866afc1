"""Fuzzing the router: every `Inbound`, in every conversation state, routes to one intent.

`route`, `parse_command` and `screen` are pure and total: they answer for any
inbound an adapter can build (any text, commands for us and for other bots,
images, presses with and without a typed answer, replies to open dialogs and to
other messages, edits, bots) in any `View` (idle, busy, compacting, each busy
policy, open input dialogs, an awaited answer, Telegram's and Slack's command
prefixes). Beyond not raising, the answers keep the routing rules' promises:
nothing empty reaches the agent, an idle agent is never steered, a compacting
one gets nothing until it is done, what was typed arrives as typed.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from hypothesis import example, given
from hypothesis import strategies as st

from bridge.admission import screen
from bridge.conversation.routing import (
    AskBusy,
    Control,
    DialogReply,
    FollowUp,
    Hold,
    Ignore,
    Press,
    Prompt,
    Steer,
    Stop,
    View,
    parse_command,
    route,
)
from bridge.model import ButtonPress, ChatRef, Image, Inbound, MessageRef, Sender
from tests.support.fuzzing import FUZZ, TEXT, ran

if TYPE_CHECKING:
    from bridge.conversation.routing import BusyPolicy

INTENTS = (Prompt, Steer, FollowUp, AskBusy, Hold, Stop, Press, DialogReply, Control, Ignore)
SENDERS = ["42", "43", "U1"]
PNG = Image(b"\x89PNG", "image/png")
WORDS = [
    "/stop",
    "/STOP",
    "!stop",
    "!abort",
    "/cancel@pi_test_bot",
    "/stop@other_bot",
    "/steer",
    "/later",
    "/followup",
    "/follow_up",
    "/model",
    "/new@PI_TEST_BOT",
    "/help@other_bot",
    "/review",
    "/skill:pdf",
    "/",
    "//x",
    "/1x",
    "!",
    ">>",
    "stop",
    "new",
]


@st.composite
def texts(draw: st.DrawFn) -> str:
    """What a person types: often a command or a prefix, then anything."""
    head = draw(st.sampled_from(["", *WORDS]))
    tail = draw(st.sampled_from(["", " ", "  ", "\n"])) + draw(TEXT)
    return draw(st.sampled_from(["", " ", "\t"])) + head + (tail if draw(st.booleans()) else "")


@st.composite
def inbounds(draw: st.DrawFn) -> Inbound:
    press = None
    if draw(st.integers(0, 4)) == 0:
        message = draw(st.none() | st.just(MessageRef(ChatRef("1"), "m1")))
        typed = draw(st.none() | TEXT)
        press = ButtonPress(draw(st.text(max_size=20)), draw(st.text(max_size=8)), message, typed)
    sender = Sender(
        draw(st.sampled_from(SENDERS)),
        draw(st.text(max_size=6)),
        is_bot=draw(st.booleans()),
        groups=frozenset(draw(st.lists(st.sampled_from(["S1", "S2"]), max_size=2))),
    )
    return Inbound(
        key="tg:1",
        chat=ChatRef("1"),
        sender=sender,
        event_id=draw(st.text(max_size=6)),
        text=draw(texts()),
        images=(PNG,) * draw(st.integers(0, 2)),
        reply_to=draw(st.sampled_from([None, None, "m1", "m9"])),
        press=press,
        from_self=draw(st.booleans()),
        is_edit=draw(st.booleans()),
    )


VIEWS = st.builds(
    View,
    busy=st.booleans(),
    compacting=st.booleans(),
    policy=st.sampled_from(["steer", "follow_up", "ask"]),
    input_dialogs=st.sampled_from([None, {}, {"m1": "req-1"}]),
    awaiting=st.sampled_from([None, {}, {"42": "req-2"}, {"U1": "req-2"}]),
    bot_name=st.sampled_from(["", "pi_test_bot", "PI_TEST_BOT"]),
    prefixes=st.sampled_from([("/",), ("/", "!")]),
)


@FUZZ
@given(inbounds(), VIEWS)
def test_every_inbound_routes_to_one_intent_in_every_conversation_state(
    inbound: Inbound, view: View
) -> None:
    ran("router: route")
    intent = route(inbound, view)
    assert isinstance(intent, INTENTS), intent
    if inbound.press is not None:
        press = inbound.press
        assert intent == Press(press.token, press.press_id, press.text)
    elif inbound.reply_to is not None and inbound.reply_to in (view.input_dialogs or {}):
        assert intent == DialogReply("req-1", inbound.text)


def keeps_the_agent_states(inbound: Inbound, view: View) -> None:
    """An idle agent is never steered; a compacting one is sent nothing until it is done."""
    intent = route(inbound, view)
    if isinstance(intent, Steer | FollowUp):
        assert view.busy, (intent, view)
        assert not view.compacting, (intent, view)
    if isinstance(intent, AskBusy):
        assert view.busy, (intent, view)
        assert view.policy == "ask", (intent, view)
    if isinstance(intent, Hold):
        assert view.compacting, (intent, view)
    if view.compacting:
        assert not isinstance(intent, Prompt | Steer | FollowUp), (intent, view)


def sends_nothing_empty(inbound: Inbound, view: View) -> None:
    """What goes to the agent has text or images, and a photo is never lost on the way."""
    intent = route(inbound, view)
    sent = intent.then if isinstance(intent, Hold) else intent
    if isinstance(sent, Prompt | Steer | FollowUp | AskBusy):
        assert sent.text.strip() or sent.images, (inbound.text, view, intent)
        assert sent.images == inbound.images, intent


@FUZZ
@given(inbounds(), VIEWS)
def test_an_idle_agent_is_never_steered_and_a_compacting_one_is_sent_nothing(
    inbound: Inbound, view: View
) -> None:
    ran("router: agent states")
    keeps_the_agent_states(inbound, view)


@FUZZ
@given(inbounds(), VIEWS)
# Found by this suite: a bare "/steer" to an idle agent became an empty prompt.
@example(Inbound("tg:1", ChatRef("1"), Sender("42"), "e", text="/steer"), View())
def test_nothing_empty_is_ever_sent_to_the_agent(inbound: Inbound, view: View) -> None:
    ran("router: nothing empty")
    sends_nothing_empty(inbound, view)


def test_every_command_word_alone_or_with_an_argument_keeps_those_promises_in_every_state() -> None:
    """The command vocabulary is small: all of it, in every state, none left to chance."""
    policies: list[BusyPolicy] = ["steer", "follow_up", "ask"]
    states = itertools.product([False, True], [False, True], policies)
    views = [
        View(busy, compacting, policy, prefixes=prefixes, bot_name=bot)
        for busy, compacting, policy in states
        for prefixes in [("/",), ("/", "!")]
        for bot in ["", "pi_test_bot"]
    ]
    for word, tail, images, view in itertools.product(WORDS, ["", " ", " x"], [(), (PNG,)], views):
        ran("router: every command in every state")
        inbound = Inbound("tg:1", ChatRef("1"), Sender("42"), "e", word + tail, images)
        keeps_the_agent_states(inbound, view)
        sends_nothing_empty(inbound, view)


@FUZZ
@given(inbounds(), VIEWS)
def test_a_plain_message_reaches_the_agent_as_it_was_typed(inbound: Inbound, view: View) -> None:
    ran("router: plain text")
    text = inbound.text.strip()
    plain = parse_command(text, view.prefixes, view.bot_name) is None
    plain = plain and not text.startswith(">>") and inbound.press is None
    answering = inbound.reply_to in (view.input_dialogs or {}) or inbound.sender.id in (
        view.awaiting or {}
    )
    if not plain or answering or not (text or inbound.images):
        return
    intent = route(inbound, view)
    sent = intent.then if isinstance(intent, Hold) else intent
    assert isinstance(sent, Prompt | Steer | FollowUp | AskBusy), intent
    assert sent.text == text


NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_.:-]{0,15}", fullmatch=True)


@FUZZ
@given(
    NAMES,
    TEXT,
    st.sampled_from(["", "@pi_test_bot", "@PI_Test_Bot", "@other_bot"]),
    st.sampled_from(["/", "!"]),
    st.sampled_from(["", "pi_test_bot"]),
)
def test_a_command_parses_back_to_its_name_and_argument(
    name: str, arg: str, mention: str, prefix: str, bot_name: str
) -> None:
    ran("router: parse_command round trip")
    parsed = parse_command(f"{prefix}{name}{mention} {arg}", ("/", "!"), bot_name)
    for_another_bot = mention == "@other_bot" and bot_name
    assert parsed == (None if for_another_bot else (name.lower(), arg.strip()))


@FUZZ
@given(TEXT | texts(), st.sampled_from([("/",), ("/", "!")]), st.text(max_size=12))
def test_any_text_parses_to_a_lowercase_command_or_to_none(
    text: str, prefixes: tuple[str, ...], bot_name: str
) -> None:
    ran("router: parse_command")
    parsed = parse_command(text, prefixes, bot_name)
    if parsed is not None:
        name, arg = parsed
        assert text.startswith(prefixes), parsed
        assert name[:1].isalpha(), parsed
        assert name == name.lower(), parsed
        assert arg == arg.strip(), parsed


@FUZZ
@given(inbounds(), st.sampled_from([None, frozenset(), frozenset({"42"}), frozenset({"S1"})]))
def test_screening_drops_bots_and_edits_and_refuses_only_strangers(
    inbound: Inbound, allowed: frozenset[str] | None
) -> None:
    ran("router: screen")
    gate = screen(inbound, allowed)
    if inbound.from_self or inbound.sender.is_bot or inbound.is_edit:
        assert gate is not None
        assert gate.action == "drop"
    elif allowed is not None and not inbound.sender.named_in(allowed):
        assert gate is not None
        assert gate.action == "refuse"
    else:
        assert gate is None

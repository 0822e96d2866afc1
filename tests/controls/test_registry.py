"""The command registry is the one place a command is declared: the router, /help,
the Telegram command menu and Slack's addressed `!`-commands all agree with it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from adapters.slack.convert import clean_text
from adapters.telegram.runner import COMMANDS as TELEGRAM_MENU
from bridge.controls.handlers import HANDLERS
from bridge.controls.handling import Handlers, Handling, Picker
from bridge.controls.registry import Command, Registry
from bridge.controls.table import COMMANDS
from bridge.conversation.routing import Control, FollowUp, Prompt, Steer, Stop, View, route, urgent
from bridge.model import ChatRef, Inbound, Sender

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op

BUSY = View(busy=True, prefixes=("/", "!"))
WORDS = [(c, w) for c in COMMANDS.commands for w in c.words]


def said(text: str) -> Inbound:
    return Inbound(
        key="tg:1", chat=ChatRef("1"), sender=Sender("42", "alice"), event_id="e", text=text
    )


@pytest.mark.parametrize(("command", "word"), WORDS, ids=[w for _, w in WORDS])
def test_the_router_does_what_the_registry_declares_for_every_word(
    command: Command, word: str
) -> None:
    for prefix in ("/", "!"):
        intent = route(said(f"{prefix}{word} some text"), BUSY)
        expected = {
            "stop": Stop(),
            "steer": Steer("some text"),
            "later": FollowUp("some text"),
            "control": Control(command.name, "some text"),
        }[command.action]
        assert intent == expected
    # Only stop words skip the inbox.
    assert (urgent(said(f"/{word}"), ("/",)) is not None) == (command.action == "stop")


def test_a_word_the_registry_does_not_know_goes_to_the_agent() -> None:
    assert "skill:review" not in COMMANDS.words()
    assert route(said("/skill:review now"), View()) == Prompt("/skill:review now")


def test_control_commands_have_handlers_and_the_routers_own_have_none() -> None:
    for command in COMMANDS.commands:
        assert (HANDLERS.handling(command.name) is not None) == (command.action == "control"), (
            command.name
        )


def test_help_names_every_command_once_and_says_which_wait_for_idle() -> None:
    text = COMMANDS.help()
    for command in COMMANDS.commands:
        named = (f"`/{command.name}`", f"`/{command.name} ")  # /pr is not /project
        lines = [line for line in text.splitlines() if line.startswith(named)]
        assert len(lines) == 1, command.name
        assert lines[0].endswith("(while idle)") == command.idle_only
        assert command.summary in lines[0]


def test_the_telegram_menu_is_the_registry_within_telegrams_rules() -> None:
    assert list(TELEGRAM_MENU) == [(c.name, c.summary) for c in COMMANDS.commands]
    for name, summary in TELEGRAM_MENU:  # setMyCommands: 1-32 chars a-z0-9_, 1-256 chars
        assert re.fullmatch(r"[a-z0-9_]{1,32}", name)
        assert 1 <= len(summary) <= 256


@pytest.mark.parametrize(("command", "word"), WORDS, ids=[w for _, w in WORDS])
def test_slack_addresses_exactly_the_registrys_commands(command: Command, word: str) -> None:
    alone = clean_text(f"<@UBOT> {word}", "UBOT")
    with_text = clean_text(f"<@UBOT> {word} now please", "UBOT")
    # A control word is a command on its own; a stop word even with more words.
    assert alone.startswith("!") == (command.action in ("stop", "control"))
    assert with_text.startswith("!") == (command.action == "stop")
    assert not clean_text(f"{word}", "UBOT").startswith("!")  # not addressed: an answer


def test_two_commands_may_not_share_a_word() -> None:
    one = Command("one", "first", "session", aliases=("x",))
    two = Command("two", "second", "session", aliases=("x",))
    with pytest.raises(ValueError, match="'x' declared twice"):
        Registry([one, two])


async def _nothing(target: Target, arg: str) -> list[Op]:
    return []


TWO = Registry(
    [Command("stop", "stop", "talk", "stop"), Command("one", "first", "session", idle_only=True)]
)


# (the handlings bound to TWO's commands, what the error says)
MISBOUND = [
    ({}, "control commands without a handler: \\['one'\\]"),
    (
        {"one": Handling(_nothing), "stop": Handling(_nothing)},
        "handlers of no control command: \\['stop'\\]",
    ),
    (
        {"one": Handling(_nothing, (Picker("k", _nothing), Picker("k", _nothing)))},
        "picker kind 'k' declared twice",
    ),
]


@pytest.mark.parametrize(("bound", "said"), MISBOUND)
def test_handlers_and_commands_must_name_the_same_commands(
    bound: dict[str, Handling], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        Handlers(TWO, bound)


def test_a_picker_belongs_to_its_command_and_a_word_finds_its_handling() -> None:
    picked = Picker("k", _nothing)
    handlers = Handlers(TWO, {"one": Handling(_nothing, (picked,))})
    assert handlers.picker("k") == (TWO.find("one"), picked)
    assert handlers.picker("other") is None
    found = handlers.handling("ONE")
    assert found is not None
    assert found[0].idle_only
    assert handlers.handling("stop") is None  # the router's own

"""`/pi` parsing and the conversation it starts (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.convert import Identity
from adapters.slack.slash import SlashTask, as_inbound, from_command, root_text
from bridge.model import ChatRef

ME = Identity("T1", "UBOT", "BBOT")


def command(text: str, **fields: str) -> dict[str, Any]:
    return {
        "team_id": "T1",
        "channel_id": "C1",
        "user_id": "U1",
        "user_name": "alice",
        "command": "/pi",
        "text": text,
        "trigger_id": "trig-1",
        **fields,
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(command(""), None, id="no task: the usage"),
        pytest.param(command("  help "), None, id="help: the usage"),
        pytest.param(command("?"), None, id="question mark: the usage"),
        pytest.param(command("fix the build", channel_id=""), None, id="no channel"),
        pytest.param(
            command("fix the build"),
            SlashTask("T1", "C1", "U1", "alice", "fix the build", "command:trig-1"),
            id="a task",
        ),
        pytest.param(
            command("<@UBOT> look at <https://x.test|this> &amp; that"),
            SlashTask("T1", "C1", "U1", "alice", "look at https://x.test & that", "command:trig-1"),
            id="text read as typed",
        ),
        pytest.param(
            command("stop"),
            SlashTask("T1", "C1", "U1", "alice", "stop", "command:trig-1"),
            id="a bare word is a task, not a command",
        ),
    ],
)
def test_a_command_is_a_task_or_a_request_for_the_usage(
    body: dict[str, Any], expected: SlashTask | None
) -> None:
    assert from_command(body, ME) == expected


def test_the_root_says_who_asked_and_quotes_the_task_without_interpreting_it() -> None:
    task = SlashTask("T1", "C1", "U1", "alice", "deploy <!channel> & go\nthen test", "d")
    assert root_text(task) == "<@U1> asked:\n> deploy &lt;!channel&gt; &amp; go\n> then test"


@pytest.mark.parametrize(
    ("channel", "key", "chat", "private"),
    [
        ("C1", "slack:T1:C1:900.1", ChatRef("C1", "900.1"), "C1|U1|900.1"),
        ("D1", "slack:T1:D1", ChatRef("D1"), ""),
    ],
    ids=["a channel: a thread under the root", "a DM: the DM's conversation"],
)
def test_the_task_is_the_first_message_of_its_conversation(
    channel: str, key: str, chat: ChatRef, private: str
) -> None:
    task = SlashTask("T1", channel, "U1", "alice", "fix it", "command:trig-1")
    inbound = as_inbound(task, "900.1")
    assert (inbound.key, inbound.chat, inbound.text) == (key, chat, "fix it")
    assert (inbound.sender.id, inbound.event_id) == ("U1", "command:trig-1")
    assert inbound.message_id == "900.1"
    assert inbound.private_reply == private

"""Reading the approval gate's question out of a dialog title."""

from __future__ import annotations

import json

import pytest

from bridge.approvals.ask import OPTIONS, PREFIX, ApprovalAsk, parse

DROP = object()  # a field left out of the payload


def title(**changes: object) -> str:
    payload: dict[str, object] = {
        "v": 1,
        "toolCallId": "call_1",
        "tool": "bash",
        "cwd": "/ws",
        "input": {"command": "ls -la"},
        "truncated": False,
    }
    payload.update(changes)
    return PREFIX + json.dumps({k: v for k, v in payload.items() if v is not DROP})


def test_a_title_of_the_gate_parses_to_its_ask() -> None:
    ask = parse(title())
    assert ask == ApprovalAsk(
        tool="bash", tool_call_id="call_1", cwd="/ws", input={"command": "ls -la"}, truncated=False
    )
    assert ask.command == "ls -la"
    assert ask.path == ""
    assert OPTIONS == ("allow", "always", "deny", "reason")


NOT_OURS: list[str] = [
    "",
    "⚠️ Dangerous command:\n\n  rm -rf build\n\nAllow?",
    "pi-bridge:approval",  # the prefix without its space
    "pi-bridge:approval{}",
    PREFIX,
    PREFIX + "{not json",
    PREFIX + "null",
    PREFIX + "[1, 2]",
    PREFIX + '"text"',
    PREFIX + "[" * 100_000 + "]" * 100_000,  # too deep for the JSON reader
    " " + title(),
    title(v=2),
    title(v="1"),
    title(v=True),  # JSON true is not version 1
    title(v=DROP),
    title(tool=""),
    title(tool=7),
    title(tool=DROP),
    title(toolCallId=""),
    title(toolCallId=None),
    title(cwd=None),
    title(input=["ls"]),
    title(input="ls"),
    title(truncated="no"),
]


@pytest.mark.parametrize("text", NOT_OURS)
def test_other_or_broken_titles_are_not_ours(text: str) -> None:
    assert parse(text) is None


@pytest.mark.parametrize(
    ("changes", "truncated"),
    [({"truncated": True}, True), ({"truncated": DROP}, False), ({"input": DROP}, False)],
)
def test_optional_fields_have_defaults(changes: dict[str, object], truncated: bool) -> None:
    ask = parse(title(**changes))
    assert ask is not None
    assert ask.truncated is truncated


# (tool, input) → (command, path)
HELPERS: list[tuple[str, dict[str, object], str, str]] = [
    ("bash", {"command": "make test"}, "make test", ""),
    ("bash", {"command": 3}, "", ""),
    ("bash", {}, "", ""),
    ("read", {"command": "x", "path": "a.txt"}, "", ""),
    ("edit", {"path": "src/app.py"}, "", "/ws/src/app.py"),
    ("write", {"path": "./out/../notes.md"}, "", "/ws/notes.md"),
    ("write", {"path": "/etc/hosts"}, "", "/etc/hosts"),
    ("write", {"path": "../up.txt"}, "", "/up.txt"),
    ("edit", {"path": "@src/app.py"}, "", "/ws/src/app.py"),  # pi drops a leading @
    ("edit", {"path": "file:///etc/my%20file"}, "", "/etc/my file"),
    ("edit", {"path": "~/.bashrc"}, "", "~/.bashrc"),  # the agent's home is not known
    ("edit", {"path": "~"}, "", "~"),
    ("edit", {"path": "a\u00a0b.txt"}, "", "/ws/a b.txt"),
    ("edit", {"file_path": "x.py"}, "", "/ws/x.py"),
    ("edit", {"path": ""}, "", ""),
    ("edit", {"path": None}, "", ""),
    ("read", {"path": "a.txt"}, "", ""),
]


@pytest.mark.parametrize(("tool", "arguments", "command", "path"), HELPERS)
def test_command_and_path(tool: str, arguments: dict[str, object], command: str, path: str) -> None:
    ask = ApprovalAsk(tool=tool, tool_call_id="c", cwd="/ws", input=arguments, truncated=False)
    assert (ask.command, ask.path) == (command, path)


def test_a_title_keeps_unicode_and_newlines_of_the_input() -> None:
    command = "printf 'a\\nb' && echo 🦊\u2028"
    ask = parse(title(input={"command": command}))
    assert ask is not None
    assert ask.command == command

"""`encode_command` writes every command as one ASCII JSON-object line, nulls left out.

A bare `null` line crashes 0.73.1 and 0.87.1, and the legacy agent's reader on Node
24 splits a raw U+2028, so every line must be an object, ASCII only, with one LF at
the end and no `null` anywhere (docs/rpc.md, "Commands are one ASCII line").
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from bridge.rpc.commands import (
    Abort,
    AbortBash,
    AbortRetry,
    Bash,
    ClearQueue,
    Clone,
    Compact,
    CycleModel,
    CycleThinkingLevel,
    ExportHtml,
    FollowUp,
    Fork,
    GetAvailableModels,
    GetAvailableThinkingLevels,
    GetCommands,
    GetEntries,
    GetForkMessages,
    GetLastAssistantText,
    GetMessages,
    GetSessionStats,
    GetState,
    GetTree,
    LegacyAttachment,
    LegacyPrompt,
    NewSession,
    Outgoing,
    Prompt,
    SetAutoCompaction,
    SetAutoRetry,
    SetFollowUpMode,
    SetModel,
    SetSessionName,
    SetSteeringMode,
    SetThinkingLevel,
    Steer,
    SwitchSession,
    UIResponse,
    encode_command,
)
from bridge.rpc.content import ImageContent

PNG = (  # the 4x4 image of the i_image transcripts
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="
)
TRICKY = 'line\u2028sep\u2029para é 😀 "quoted" back\\slash\nnewline'

# Each command twice where it has optional fields: with only what it needs (optional
# fields unset, so they must be left out) and with everything set.
COMMANDS: list[Outgoing] = [
    Prompt(message="hello"),
    Prompt(
        id="p1",
        message=TRICKY,
        images=[ImageContent(data=PNG, mimeType="image/png")],
        streamingBehavior="followUp",
    ),
    LegacyPrompt(message="hello"),
    LegacyPrompt(
        id="lp1",
        message=TRICKY,
        attachments=[
            LegacyAttachment(
                id="img1", fileName="a.png", mimeType="image/png", size=70, content=PNG
            )
        ],
    ),
    Steer(message="stop"),
    Steer(id="s1", message=TRICKY, images=[ImageContent(data=PNG, mimeType="image/jpeg")]),
    FollowUp(message="then"),
    FollowUp(id="f1", message=TRICKY, images=[]),
    Abort(),
    NewSession(),
    NewSession(id="n1", parentSession="/srv/lab/sessions/a.jsonl"),
    GetState(id="g1"),
    GetMessages(),
    SetModel(provider="fake", modelId="fake-model"),
    CycleModel(),
    GetAvailableModels(),
    SetThinkingLevel(level="high"),
    CycleThinkingLevel(),
    GetAvailableThinkingLevels(),
    SetSteeringMode(mode="all"),
    SetFollowUpMode(mode="one-at-a-time"),
    Compact(),
    Compact(customInstructions=TRICKY),
    SetAutoCompaction(enabled=False),
    SetAutoRetry(enabled=True),
    AbortRetry(),
    Bash(command="echo 'hi' && ls"),
    AbortBash(),
    GetSessionStats(),
    ExportHtml(),
    ExportHtml(outputPath="/tmp/out.html"),
    SwitchSession(sessionPath="/srv/lab/sessions/b.jsonl"),
    Fork(entryId="e1"),
    Clone(),
    GetForkMessages(),
    GetLastAssistantText(),
    SetSessionName(name=TRICKY),
    GetCommands(),
    ClearQueue(),
    GetEntries(),
    GetTree(),
    UIResponse(id="d1"),
    UIResponse(id="d1", value=TRICKY),
    UIResponse(id="d1", confirmed=False),
    UIResponse(id="d1", cancelled=True),
]


def command_id(command: Outgoing) -> str:
    set_fields = sorted(command.model_fields_set - {"type"})
    return f"{type(command).__name__}({','.join(set_fields)})"


def nulls_in(value: Any, where: str = "") -> list[str]:
    """Paths of every `null` in a decoded JSON value."""
    if value is None:
        return [where or "<root>"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nulls_in(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in nulls_in(v, f"{where}[{i}]")]
    return []


def test_the_table_holds_every_command_model() -> None:
    assert {type(c) for c in COMMANDS} == set(get_args(Outgoing))


@pytest.mark.parametrize("command", COMMANDS, ids=command_id)
def test_a_command_encodes_to_one_ascii_line_ending_in_lf(command: Outgoing) -> None:
    line = encode_command(command)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert line.isascii()
    assert b"\r" not in line
    assert b"\xe2\x80\xa8" not in line  # the raw U+2028 the legacy reader splits on


@pytest.mark.parametrize("command", COMMANDS, ids=command_id)
def test_a_command_is_a_json_object_with_no_null_anywhere(command: Outgoing) -> None:
    decoded = json.loads(encode_command(command))
    assert isinstance(decoded, dict)
    assert decoded["type"] == command.type
    assert nulls_in(decoded) == []


@pytest.mark.parametrize("command", COMMANDS, ids=command_id)
def test_a_command_carries_exactly_the_fields_that_were_set(command: Outgoing) -> None:
    decoded = json.loads(encode_command(command))
    assert set(decoded) == {name for name, value in command if value is not None}


@pytest.mark.parametrize("command", COMMANDS, ids=command_id)
def test_text_survives_the_ascii_escaping_unchanged(command: Outgoing) -> None:
    decoded = json.loads(encode_command(command))
    assert decoded == command.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize(
    ("command", "line"),
    [
        (
            Prompt(
                id="p1", message="look", images=[ImageContent(data="iVBO", mimeType="image/png")]
            ),
            b'{"id":"p1","message":"look","images":[{"type":"image","data":"iVBO",'
            b'"mimeType":"image/png"}],"type":"prompt"}\n',
        ),
        (
            Prompt(id="p2", message="and this", streamingBehavior="steer"),
            b'{"id":"p2","message":"and this","type":"prompt","streamingBehavior":"steer"}\n',
        ),
        (
            Steer(id="s1", message="stop that"),
            b'{"id":"s1","message":"stop that","type":"steer"}\n',
        ),
        (
            FollowUp(message="then this"),
            b'{"message":"then this","type":"follow_up"}\n',
        ),
        (
            UIResponse(id="d1", confirmed=True),
            b'{"type":"extension_ui_response","id":"d1","confirmed":true}\n',
        ),
        (
            UIResponse(id="d1", confirmed=False),
            b'{"type":"extension_ui_response","id":"d1","confirmed":false}\n',
        ),
        (
            UIResponse(id="d1", cancelled=True),
            b'{"type":"extension_ui_response","id":"d1","cancelled":true}\n',
        ),
        (
            UIResponse(id="d1", value="Yes"),
            b'{"type":"extension_ui_response","id":"d1","value":"Yes"}\n',
        ),
        (
            LegacyPrompt(
                message="see",
                attachments=[
                    LegacyAttachment(
                        id="img1", fileName="a.png", mimeType="image/png", size=3, content="AAAA"
                    )
                ],
            ),
            b'{"type":"prompt","message":"see","attachments":[{"id":"img1","type":"image",'
            b'"fileName":"a.png","mimeType":"image/png","size":3,"content":"AAAA"}]}\n',
        ),
        (
            Prompt(message="a\u2028b\u2029c 😀 é"),
            b'{"message":"a\\u2028b\\u2029c \\ud83d\\ude00 \\u00e9","type":"prompt"}\n',
        ),
        (Abort(), b'{"type":"abort"}\n'),
        (GetState(id="get_state-1"), b'{"id":"get_state-1","type":"get_state"}\n'),
    ],
    ids=[
        "prompt-with-image",
        "prompt-while-streaming",
        "steer",
        "follow-up",
        "dialog-confirmed",
        "dialog-declined",
        "dialog-cancelled",
        "dialog-value",
        "legacy-prompt-with-attachment",
        "separators-and-emoji-escaped",
        "abort",
        "get-state",
    ],
)
def test_a_command_encodes_to_exactly_this_line(command: Outgoing, line: bytes) -> None:
    assert encode_command(command) == line


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (SetSessionName, {"name": ""}),
        (Prompt, {"message": "x", "streamingBehavior": "whenever"}),
        (Prompt, {}),
        (SetThinkingLevel, {"level": "extreme"}),
        (SetSteeringMode, {"mode": "some"}),
        (UIResponse, {}),
        (LegacyAttachment, {"id": "a", "fileName": "a.png", "mimeType": "image/png"}),
    ],
    ids=[
        "empty-session-name",
        "unknown-streaming-behavior",
        "prompt-without-message",
        "unknown-thinking-level",
        "unknown-queue-mode",
        "dialog-answer-without-id",
        "attachment-without-content",
    ],
)
def test_a_command_the_agents_would_reject_cannot_be_built(
    model: type[Any], fields: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        model(**fields)

"""Commands the client writes to the agent's stdin, one JSON object per line.

`encode_command` is the only way a command reaches the wire: always a JSON
object (a bare `null` line crashes 0.73.1 and 0.87.1), ASCII-escaped (the legacy
agent's reader on Node 24 splits a raw U+2028), `None` fields left out, and one
LF at the end.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field

from bridge.rpc.content import ImageContent
from bridge.rpc.wire import Wire

StreamingBehavior = Literal["steer", "followUp"]
ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
QueueMode = Literal["all", "one-at-a-time"]


class _Command(Wire):
    id: str | None = None


class _MessageCommand(_Command):
    message: str
    images: list[ImageContent] | None = None


class Prompt(_MessageCommand):
    type: Literal["prompt"] = "prompt"
    streamingBehavior: StreamingBehavior | None = None


class LegacyAttachment(Wire):
    """The legacy protocol's image attachment (rpc-pi-legacy.md, "Attachment")."""

    id: str
    type: Literal["image", "document"] = "image"
    fileName: str
    mimeType: str
    size: int
    content: str  # base64, no data: prefix


class LegacyPrompt(_Command):
    type: Literal["prompt"] = "prompt"
    message: str
    attachments: list[LegacyAttachment] | None = None


class Steer(_MessageCommand):
    type: Literal["steer"] = "steer"


class FollowUp(_MessageCommand):
    type: Literal["follow_up"] = "follow_up"


class Abort(_Command):
    type: Literal["abort"] = "abort"


class NewSession(_Command):
    type: Literal["new_session"] = "new_session"
    parentSession: str | None = None


class GetState(_Command):
    type: Literal["get_state"] = "get_state"


class GetMessages(_Command):
    type: Literal["get_messages"] = "get_messages"


class SetModel(_Command):
    type: Literal["set_model"] = "set_model"
    provider: str
    modelId: str


class CycleModel(_Command):
    type: Literal["cycle_model"] = "cycle_model"


class GetAvailableModels(_Command):
    type: Literal["get_available_models"] = "get_available_models"


class SetThinkingLevel(_Command):
    type: Literal["set_thinking_level"] = "set_thinking_level"
    level: ThinkingLevel


class CycleThinkingLevel(_Command):
    type: Literal["cycle_thinking_level"] = "cycle_thinking_level"


class GetAvailableThinkingLevels(_Command):
    """0.87.1 and atomic only."""

    type: Literal["get_available_thinking_levels"] = "get_available_thinking_levels"


class SetSteeringMode(_Command):
    type: Literal["set_steering_mode"] = "set_steering_mode"
    mode: QueueMode


class SetFollowUpMode(_Command):
    type: Literal["set_follow_up_mode"] = "set_follow_up_mode"
    mode: QueueMode


class Compact(_Command):
    type: Literal["compact"] = "compact"
    customInstructions: str | None = None


class SetAutoCompaction(_Command):
    type: Literal["set_auto_compaction"] = "set_auto_compaction"
    enabled: bool


class SetAutoRetry(_Command):
    type: Literal["set_auto_retry"] = "set_auto_retry"
    enabled: bool


class AbortRetry(_Command):
    type: Literal["abort_retry"] = "abort_retry"


class Bash(_Command):
    type: Literal["bash"] = "bash"
    command: str


class AbortBash(_Command):
    type: Literal["abort_bash"] = "abort_bash"


class GetSessionStats(_Command):
    type: Literal["get_session_stats"] = "get_session_stats"


class ExportHtml(_Command):
    type: Literal["export_html"] = "export_html"
    outputPath: str | None = None


class SwitchSession(_Command):
    type: Literal["switch_session"] = "switch_session"
    sessionPath: str


class Fork(_Command):
    type: Literal["fork"] = "fork"
    entryId: str


class Clone(_Command):
    """0.87.1 and atomic only: copy the session into a new one."""

    type: Literal["clone"] = "clone"


class GetForkMessages(_Command):
    type: Literal["get_fork_messages"] = "get_fork_messages"


class GetLastAssistantText(_Command):
    type: Literal["get_last_assistant_text"] = "get_last_assistant_text"


class SetSessionName(_Command):
    type: Literal["set_session_name"] = "set_session_name"
    name: str = Field(min_length=1)  # the agents reject "" (docs/rpc.md, "Session names")


class GetCommands(_Command):
    type: Literal["get_commands"] = "get_commands"


class ClearQueue(_Command):
    """0.87.1 and atomic only: returns the removed steering and follow-up messages."""

    type: Literal["clear_queue"] = "clear_queue"


class GetEntries(_Command):
    type: Literal["get_entries"] = "get_entries"


class GetTree(_Command):
    type: Literal["get_tree"] = "get_tree"


class UIResponse(Wire):
    """The answer to a dialog. Exactly one of value / confirmed / cancelled is set."""

    type: Literal["extension_ui_response"] = "extension_ui_response"
    id: str
    value: str | None = None
    confirmed: bool | None = None
    cancelled: bool | None = None


Command = (
    Prompt
    | LegacyPrompt
    | Steer
    | FollowUp
    | Abort
    | NewSession
    | GetState
    | GetMessages
    | SetModel
    | CycleModel
    | GetAvailableModels
    | SetThinkingLevel
    | CycleThinkingLevel
    | GetAvailableThinkingLevels
    | SetSteeringMode
    | SetFollowUpMode
    | Compact
    | SetAutoCompaction
    | SetAutoRetry
    | AbortRetry
    | Bash
    | AbortBash
    | GetSessionStats
    | ExportHtml
    | SwitchSession
    | Fork
    | Clone
    | GetForkMessages
    | GetLastAssistantText
    | SetSessionName
    | GetCommands
    | ClearQueue
    | GetEntries
    | GetTree
)

Outgoing = Command | UIResponse


def encode_command(command: Outgoing) -> bytes:
    """One command as one wire line: a JSON object, ASCII only, LF-terminated."""
    payload = command.model_dump(mode="json", exclude_none=True)
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"

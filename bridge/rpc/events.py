"""Everything an agent writes to stdout: responses and events.

One discriminated union on `type` (`AgentOutput`), decoded by `bridge.rpc.decode`.
Fields are lenient (defaults everywhere) because the three agent families differ
in which fields they send; types unknown to this module become `UnknownEvent`
in the decoder, never an error. The heavy `message`/`partial` snapshots of
0.73.1's `message_update` are typed too: decoding them with pydantic-core is
still faster than a bare `json.loads` (bench/rpc_decode.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from bridge.rpc.content import AgentMessage, AssistantMessage, ToolResult, ToolResultMessage
from bridge.rpc.ui import KnownUIRequest
from bridge.rpc.wire import Wire, tags

# --- responses -------------------------------------------------------------------


class Response(Wire):
    """The answer to a command. `id` is missing on some errors (docs/rpc.md,
    "Correlation by `id`, then by command name")."""

    type: Literal["response"]
    id: str | None = None
    command: str | None = None
    success: bool = False
    error: str | None = None
    data: Any = None


# --- run lifecycle ---------------------------------------------------------------


class AgentStart(Wire):
    type: Literal["agent_start"]


class AgentEnd(Wire):
    """End of one agent loop. Not the end of a run: a retry may follow."""

    type: Literal["agent_end"]
    messages: list[AgentMessage] = Field(default_factory=list)
    willRetry: bool | None = None  # 0.87.1 only


class AgentSettled(Wire):
    """0.87.1 and atomic: the run is over, no retry or queued message pending.
    `aborted` (1.x): whether it was stopped (an abort was asked for during it)."""

    type: Literal["agent_settled"]
    aborted: bool | None = None


class TurnStart(Wire):
    type: Literal["turn_start"]


class TurnEnd(Wire):
    type: Literal["turn_end"]
    message: AgentMessage | None = None
    toolResults: list[ToolResultMessage] = Field(default_factory=list)


class MessageStart(Wire):
    type: Literal["message_start"]
    message: AgentMessage


class MessageEnd(Wire):
    type: Literal["message_end"]
    message: AgentMessage


class AssistantMessageEvent(Wire):
    """One streaming step: text/thinking/toolcall start, delta or end, done, error."""

    type: str
    contentIndex: int | None = None
    delta: str | None = None
    content: str | None = None
    toolCall: dict[str, Any] | None = None
    partial: AssistantMessage | None = None  # 0.73.1 only: the whole message so far


class MessageUpdate(Wire):
    type: Literal["message_update"]
    assistantMessageEvent: AssistantMessageEvent
    message: AssistantMessage | None = None  # 0.73.1 only: the whole message so far


# --- tools -----------------------------------------------------------------------


class ToolExecutionStart(Wire):
    """`parentToolCallId` (1.x): a call another tool made through `ctx.executeTool()`,
    whose id is `<parent>/<n>` (docs/rpc.md, "Nested tool calls"); on all three events."""

    type: Literal["tool_execution_start"]
    toolCallId: str
    toolName: str = ""
    args: Any = None
    parentToolCallId: str | None = None


class ToolExecutionUpdate(Wire):
    """Progress of a tool. `partialResult` is cumulative: replace, don't append."""

    type: Literal["tool_execution_update"]
    toolCallId: str
    toolName: str = ""
    args: Any = None
    partialResult: ToolResult | None = None
    parentToolCallId: str | None = None


class ToolExecutionEnd(Wire):
    type: Literal["tool_execution_end"]
    toolCallId: str
    toolName: str = ""
    result: ToolResult | str | None = None  # legacy agents may send an error string
    isError: bool = False
    parentToolCallId: str | None = None
    durationMs: float | None = None  # 1.x: how long the tool ran, measured by the agent


class BashExecutionUpdate(Wire):
    """0.87.1: output of the `bash` RPC command as it arrives."""

    type: Literal["bash_execution_update"]
    id: str = ""
    delta: str = ""
    channel: str | None = None


# --- queue, compaction, retry, misc ------------------------------------------------


class QueueUpdate(Wire):
    type: Literal["queue_update"]
    steering: list[str] = Field(default_factory=list)
    followUp: list[str] = Field(default_factory=list)


class CompactionStart(Wire):
    type: Literal["compaction_start", "auto_compaction_start"]
    reason: str | None = None


class CompactionEnd(Wire):
    type: Literal["compaction_end", "auto_compaction_end"]
    reason: str | None = None
    result: Any = None
    aborted: bool = False
    willRetry: bool = False
    errorMessage: str | None = None


class LegacyCompaction(Wire):
    """The legacy protocol's single compaction event."""

    type: Literal["compaction"]
    summary: str = ""
    tokensBefore: int | None = None
    auto: bool = False


class AutoRetryStart(Wire):
    type: Literal["auto_retry_start"]
    attempt: int = 0
    maxAttempts: int = 0
    delayMs: int = 0
    errorMessage: str = ""


class AutoRetryEnd(Wire):
    type: Literal["auto_retry_end"]
    success: bool = False
    attempt: int = 0
    finalError: str | None = None


class ExtensionError(Wire):
    type: Literal["extension_error"]
    extensionPath: str = ""
    event: str = ""
    error: str = ""


class SessionInfoChanged(Wire):
    type: Literal["session_info_changed"]
    name: str | None = None


class EntryAppended(Wire):
    type: Literal["entry_appended"]
    entry: dict[str, Any] = Field(default_factory=dict)


class ThinkingLevelChanged(Wire):
    type: Literal["thinking_level_changed"]
    level: str | None = None


class ErrorEvent(Wire):
    """The legacy protocol reports bad input and failures as events, not responses."""

    type: Literal["error"]
    error: str = ""


class UnknownEvent(Wire):
    """An event type this bridge does not know; all its fields are kept."""

    type: str


KnownOutput = Annotated[
    Response
    | AgentStart
    | AgentEnd
    | AgentSettled
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageEnd
    | MessageUpdate
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | BashExecutionUpdate
    | QueueUpdate
    | CompactionStart
    | CompactionEnd
    | LegacyCompaction
    | AutoRetryStart
    | AutoRetryEnd
    | ExtensionError
    | SessionInfoChanged
    | EntryAppended
    | ThinkingLevelChanged
    | ErrorEvent
    | KnownUIRequest,
    Field(discriminator="type"),
]

# Every `type` the union decodes; any other is an `UnknownEvent` (decode.py).
KNOWN_TYPES = tags(KnownOutput, "type")

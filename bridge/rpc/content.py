"""Messages and content blocks as the agents put them inside events.

Unions fall back to a generic model (`OtherBlock`, `OtherMessage`) so a new block
type or message role from a newer agent is kept, not rejected. `UserMessage.content`
may be a string or a list of blocks (docs/rpc.md, "User content, string or blocks").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from bridge.rpc.wire import Wire


class TextContent(Wire):
    type: Literal["text"]
    text: str = ""


class ThinkingContent(Wire):
    type: Literal["thinking"]
    thinking: str = ""


class ImageContent(Wire):
    """An image as the current agents take it: base64 data and a MIME type."""

    type: Literal["image"] = "image"
    data: str
    mimeType: str


class ToolCallContent(Wire):
    type: Literal["toolCall"]
    id: str = ""
    name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)


class OtherBlock(Wire):
    """A content block of a type this bridge does not know yet."""

    type: str = ""


Block = Annotated[
    TextContent | ThinkingContent | ToolCallContent | ImageContent | OtherBlock,
    Field(union_mode="left_to_right"),
]


class Usage(Wire):
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    totalTokens: int | None = None
    cost: dict[str, float] = Field(default_factory=dict)


class UserMessage(Wire):
    role: Literal["user"]
    content: str | list[Block] = ""
    timestamp: int | None = None


class AssistantMessage(Wire):
    role: Literal["assistant"]
    content: list[Block] = Field(default_factory=list)
    stopReason: str | None = None
    errorMessage: str | None = None
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    timestamp: int | None = None


class ToolResultMessage(Wire):
    role: Literal["toolResult"]
    toolCallId: str = ""
    toolName: str = ""
    content: list[Block] = Field(default_factory=list)
    isError: bool = False
    timestamp: int | None = None


class BashExecutionMessage(Wire):
    role: Literal["bashExecution"]
    command: str = ""
    output: str = ""
    exitCode: int | None = None
    cancelled: bool = False
    truncated: bool = False


class OtherMessage(Wire):
    """A message of a role this bridge does not model (system, custom, ...)."""

    role: str = ""
    content: Any = None


AgentMessage = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage | BashExecutionMessage | OtherMessage,
    Field(union_mode="left_to_right"),
]


class ToolResult(Wire):
    """What a tool returned: content blocks plus tool-specific details."""

    content: list[Block] = Field(default_factory=list)
    details: Any = None


def text_of(blocks: str | list[Any] | None) -> str:
    """The plain text of a content value (string or blocks), other blocks skipped."""
    if blocks is None:
        return ""
    if isinstance(blocks, str):
        return blocks
    return "".join(b.text for b in blocks if isinstance(b, TextContent))

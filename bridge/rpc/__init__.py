"""The pi RPC protocol: typed wire models, LF-only framing and an async client.

Pure parts (`framing`, `decode`, `commands`, `events`, `state`, `profile`) do no
I/O and are tested with plain calls; `client` and `process` move bytes around
them. See docs/rpc.md for how the real agents behave and how this layer copes.
"""

from bridge.rpc.client import AgentClient, AgentEvent
from bridge.rpc.commands import Command, encode_command
from bridge.rpc.content import ImageContent
from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.env import agent_environment
from bridge.rpc.errors import (
    AgentExited,
    AgentStartError,
    ClientClosed,
    CommandFailed,
    RequestTimeout,
    RpcError,
    Unsupported,
)
from bridge.rpc.events import Response, UnknownEvent
from bridge.rpc.framing import LineSplitter, OversizedRecord
from bridge.rpc.process import AgentSpec
from bridge.rpc.profile import Profile
from bridge.rpc.signals import AgentGone, DialogExpired, OrphanResponse, RunEnded, RunStarted
from bridge.rpc.state import Phase, RunState

__all__ = [
    "AgentClient",
    "AgentEvent",
    "AgentExited",
    "AgentGone",
    "AgentSpec",
    "AgentStartError",
    "ClientClosed",
    "Command",
    "CommandFailed",
    "DialogExpired",
    "ImageContent",
    "LineSplitter",
    "MalformedRecord",
    "OrphanResponse",
    "OversizedRecord",
    "Phase",
    "Profile",
    "RequestTimeout",
    "Response",
    "RpcError",
    "RunEnded",
    "RunStarted",
    "RunState",
    "UnknownEvent",
    "Unsupported",
    "agent_environment",
    "decode_record",
    "encode_command",
]

"""Events the client adds to the agent's own stream, so consumers need one loop.

`RunStarted`/`RunEnded` are the run boundaries for every profile (the agents'
own `agent_end` is not one, see `bridge.rpc.state`); `DialogExpired` says an
agent-side dialog timeout fired, which the agent itself never reports;
`AgentGone` is the last item before the stream closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.rpc.events import Response
    from bridge.rpc.state import PendingDialog


@dataclass(frozen=True, slots=True)
class RunStarted:
    pass


@dataclass(frozen=True, slots=True)
class RunEnded:
    pass


@dataclass(frozen=True, slots=True)
class DialogExpired:
    """A dialog's deadline passed: the agent resolved it itself, or (`cancelled`) the
    client cancelled it for the bridge."""

    dialog: PendingDialog

    @property
    def cancelled(self) -> bool:
        return self.dialog.cancel_at_deadline

    @property
    def waited(self) -> float:
        """Seconds the dialog was open."""
        expires = self.dialog.expires_at
        return expires - self.dialog.opened_at if expires is not None else 0.0


@dataclass(frozen=True, slots=True)
class OrphanResponse:
    """A response no pending request claimed (id-less errors for lines we did not send)."""

    response: Response


@dataclass(frozen=True, slots=True)
class AgentGone:
    returncode: int | None
    stderr_tail: str


Signal = RunStarted | RunEnded | DialogExpired | OrphanResponse | AgentGone

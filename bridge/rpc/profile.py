"""Which dialect of the pi RPC protocol an agent speaks, found out at spawn.

- `pi`: @mariozechner/pi-coding-agent 0.5x-0.7x; a run ends on the last `agent_end`.
- `earendil`: 0.8x; `agent_settled`, `clear_queue`, `agent_end.willRetry`.
- `atomic`: the atomic fork; like earendil, `get_state` adds `queuedMessagesPaused`.
- `legacy`: 0.13 and older; no responses at all, `attachments` instead of
  `images`, `error` events, and no queue: the client queues for it.

Detection (`bridge.rpc.client`) asks `get_state`: the legacy agent never answers
it but does answer a non-JSON line with an `error` event; the others answer and
`get_available_thinking_levels` (unknown to 0.7x) tells earendil from pi.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bridge.rpc.events import Response


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    responses: bool = True  # the agent answers commands with `response` records
    settled_event: bool = False  # a run ends on `agent_settled`
    clear_queue: bool = False
    native_queue: bool = True  # steer / follow_up are agent commands
    legacy_attachments: bool = False  # images go in `attachments`, not `images`

    @property
    def is_legacy(self) -> bool:
        return not self.responses


PI = Profile("pi")
EARENDIL = Profile("earendil", settled_event=True, clear_queue=True)
ATOMIC = Profile("atomic", settled_event=True, clear_queue=True)
LEGACY = Profile("legacy", responses=False, native_queue=False, legacy_attachments=True)

# Commands the legacy agent understands; anything else it ignores in silence.
LEGACY_COMMANDS = frozenset({"prompt", "abort", "compact"})


def classify(state: dict[str, Any], knows_new_commands: bool) -> Profile:
    """The profile of an agent that answered `get_state` with `state`."""
    if "queuedMessagesPaused" in state:
        return ATOMIC
    return EARENDIL if knows_new_commands else PI


def extension_commands(answer: Response) -> frozenset[str]:
    """The names of the agent's extension commands, from its `get_commands` answer:
    a prompt `/name` of one runs no agent loop of its own."""
    data = answer.data if isinstance(answer.data, dict) else {}
    items = data.get("commands") or []
    return frozenset(
        str(c.get("name")) for c in items if isinstance(c, dict) and c.get("source") == "extension"
    )


PROFILES = {profile.name: profile for profile in (PI, EARENDIL, ATOMIC, LEGACY)}  # by name

"""Which dialect of the pi RPC protocol an agent speaks, found out at spawn.

- `pi`: @mariozechner/pi-coding-agent 0.5x-0.7x; a run ends on the last `agent_end`.
- `earendil`: 0.8x; `agent_settled`, `clear_queue`, `agent_end.willRetry`.
- `earendil-1`: 0.99 and 1.x; as earendil, and the answers to `prompt`, `steer` and
  `follow_up` say what became of the message (`data.disposition`), `agent_settled`
  says whether the run was stopped (`aborted`), `tool_execution_end` how long the
  tool ran (`durationMs`).
- `atomic`: the atomic fork; like earendil, `get_state` adds `queuedMessagesPaused`.
- `legacy`: 0.13 and older; no responses at all, `attachments` instead of
  `images`, `error` events, and no queue: the client queues for it.

Detection (`bridge.rpc.client`) asks `get_state`: the legacy agent never answers
it but does answer a non-JSON line with an `error` event; the others answer and
`get_available_thinking_levels` (unknown to 0.7x) tells earendil from pi. No command
without side effects tells 1.x from 0.8x (the same commands, the same state and
stats; checked against 1.5.2's source), so an earendil agent becomes `earendil-1` at
its first answer or event that carries one of 1.x's fields (`refine`); a host
reattached to remembers the profile by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

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
    dispositions: bool = False  # prompt/steer/follow_up answers carry `data.disposition`

    @property
    def is_legacy(self) -> bool:
        return not self.responses


PI = Profile("pi")
EARENDIL = Profile("earendil", settled_event=True, clear_queue=True)
EARENDIL_1 = Profile("earendil-1", settled_event=True, clear_queue=True, dispositions=True)
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


# What 1.x answers a `prompt` (`steer`/`follow_up`: the last two) with: a run began,
# the message waits in the queue, or it was dealt with and no run starts (an extension
# command, or an input handler that took it): then no `agent_settled` follows.
Disposition = Literal["started", "queued", "handled"]
DISPOSITIONS: frozenset[str] = frozenset({"started", "queued", "handled"})


def disposition(answer: Response) -> Disposition | None:
    """What became of the message `answer` answers; None where the agent does not say."""
    data = answer.data if isinstance(answer.data, dict) else {}
    value = data.get("disposition")
    return cast("Disposition", value) if value in DISPOSITIONS else None


def refine(profile: Profile, shows_1x: bool) -> Profile:
    """`profile`, or `earendil-1` where an earendil agent just showed a field of 1.x."""
    return EARENDIL_1 if shows_1x and profile is EARENDIL else profile


PROFILES = {p.name: p for p in (PI, EARENDIL, EARENDIL_1, ATOMIC, LEGACY)}  # by name

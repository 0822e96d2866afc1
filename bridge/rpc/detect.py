"""Which agent a client talks to: pi (and which version's commands), or the legacy one.

The first `get_state` tells: a legacy agent answers it with an error event, a pi one
with its state; whether `get_available_thinking_levels` is known then separates the
versions (`profile.classify`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.rpc.commands import GetAvailableThinkingLevels
from bridge.rpc.errors import AgentStartError
from bridge.rpc.profile import LEGACY, Profile, classify

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bridge.rpc.requests import Requests

# Atomic from a source build answers its first get_state after ~5.8 s.
DETECT_TIMEOUT = 30.0


async def detect(
    requests: Requests,
    write: Callable[[bytes], Awaitable[None]],
    stderr_tail: Callable[[], str],
) -> tuple[Profile, dict[str, object]]:
    """The agent's profile, and the state it first answered with ({} for legacy)."""
    try:
        answer = await requests.probe(write, DETECT_TIMEOUT)
    except TimeoutError:
        raise AgentStartError(
            f"the agent answered nothing within {DETECT_TIMEOUT:g} s: {stderr_tail()[-300:]}"
        ) from None
    if answer is None:
        return LEGACY, {}
    state = answer.data if isinstance(answer.data, dict) else {}
    newer = await requests.request(GetAvailableThinkingLevels(), check=False)
    return classify(state, knows_new_commands=newer.success), state

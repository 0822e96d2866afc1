"""The context in use when a run ends, asked of the agent for the run's final line.

One `get_session_stats` per run, with a short limit: the agent is idle then and
answers in milliseconds; an agent that does not (the legacy one has no such
command, an older one may lack `contextUsage`) leaves the share out of the line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.render.usage import context_of
from bridge.rpc.commands import GetSessionStats
from bridge.rpc.errors import RpcError

if TYPE_CHECKING:
    from bridge.render.usage import ContextUse
    from bridge.rpc.client import AgentClient

STATS_LIMIT = 2.0  # seconds: a run's final line waits no longer for it


async def context_in_use(agent: AgentClient) -> ContextUse | None:
    if not agent.alive or agent.profile.is_legacy:
        return None
    try:
        answer = await agent.request(GetSessionStats(), limit=STATS_LIMIT, check=False)
    except (RpcError, TimeoutError):
        return None
    return context_of(answer.data) if isinstance(answer.data, dict) else None

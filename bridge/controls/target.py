"""What the control commands need of a conversation: a small Protocol, so that
`controls` does not import `Conversation` (which imports `controls`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bridge.model import ConversationSettings, Op, PlatformLimits
    from bridge.projects.project import Projects
    from bridge.render import Renderer
    from bridge.rpc.client import AgentClient
    from bridge.store.records import ConversationRecord


class QueueControls(Protocol):
    """The messages waiting for the agent (bridge/conversation/pending.py), as /queue sees them."""

    def listing(self) -> list[Op]: ...

    async def clear(self) -> list[Op]: ...


class UsageReports(Protocol):
    """What the conversation's runs cost (bridge/conversation/ledger.py), as /usage sees it."""

    async def report(self) -> str: ...


class PlanControls(Protocol):
    """A plan first (bridge/conversation/plans.py), as /plan sees it."""

    async def command(self, arg: str) -> list[Op]: ...


class Target(Protocol):
    @property
    def renderer(self) -> Renderer: ...

    @property
    def queued(self) -> QueueControls: ...

    @property
    def record(self) -> ConversationRecord | None: ...

    @property
    def plans(self) -> PlanControls: ...

    @property
    def projects(self) -> Projects:
        """Its project and worktree (bridge/projects/project.py)."""

    @property
    def agent(self) -> AgentClient | None:
        """The live agent, if any; commands that need one call `ensure_agent`."""

    @property
    def busy(self) -> bool: ...

    @property
    def limits(self) -> PlatformLimits: ...

    async def ensure_agent(self) -> AgentClient: ...

    async def adopt_session(self, agent: AgentClient) -> None: ...

    async def reap(self) -> None:
        """Stop the agent; the next message starts one from the record."""

    async def set_settings(self, settings: ConversationSettings) -> None: ...

    async def save(self, **changes: object) -> None:
        """Change fields of the conversation's record, and store it."""

    def notify(self, text: str) -> None: ...

    def new_token(self) -> str: ...

    @property
    def ledger(self) -> UsageReports: ...

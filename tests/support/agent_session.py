"""Helpers for tests that drive a real agent through `AgentClient`.

`Recorder` reads the client's event stream in the background and lets a test
wait for the first event that matches, with a deadline, so no test sleeps for a
fixed time or hangs when an event never comes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, TypeVar

import anyio

from bridge.rpc.client import AgentClient
from bridge.rpc.events import MessageUpdate
from bridge.rpc.process import AgentSpec

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from bridge.rpc.agent_event import AgentEvent
    from tests.support.agents import AgentHome

T = TypeVar("T")
WAIT = 60.0  # generous: real agents start slowly on a busy two-core CI machine


class Recorder:
    def __init__(self, agent: AgentClient) -> None:
        self.agent = agent
        self.events: list[AgentEvent] = []
        self._changed = anyio.Event()

    async def run(self) -> None:
        async for event in self.agent.events:
            self.events.append(event)
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(
        self,
        kind: type[T],
        where: Callable[[T], bool] = lambda _: True,
        after: int = 0,
        within: float = WAIT,
    ) -> T:
        """The first event of `kind` at index >= `after` that satisfies `where`."""
        with anyio.fail_after(within):
            seen = after
            while True:
                for event in self.events[seen:]:
                    if isinstance(event, kind) and where(event):
                        return event
                seen = len(self.events)
                await self._changed.wait()

    def of(self, kind: type[T]) -> list[T]:
        return [e for e in self.events if isinstance(e, kind)]

    def text(self) -> str:
        """All streamed assistant text so far."""
        return "".join(
            e.assistantMessageEvent.delta or ""
            for e in self.of(MessageUpdate)
            if e.assistantMessageEvent.type == "text_delta"
        )


def spec_for(home: AgentHome, version: str, workspace: Path, *extra: str) -> AgentSpec:
    workspace.mkdir(parents=True, exist_ok=True)
    return AgentSpec(argv=home.argv(version, *extra), cwd=workspace, env=home.env())


@contextlib.asynccontextmanager
async def running(spec: AgentSpec) -> AsyncIterator[tuple[AgentClient, Recorder]]:
    async with AgentClient(spec) as agent:
        recorder = Recorder(agent)
        async with anyio.create_task_group() as tg:
            tg.start_soon(recorder.run)
            try:
                yield agent, recorder
            finally:
                tg.cancel_scope.cancel()

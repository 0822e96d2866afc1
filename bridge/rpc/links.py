"""How an `AgentClient` reaches its agent: the agent's own pipes, or its host's socket.

A `Link` moves whole records: `write` one to the agent's stdin, `read` every record
the agent writes (to a dispatch callback) until the agent has ended or the link is
let go, `wait` for the exit, `terminate` the agent. `ProcessLink` is a child process
with its three pipes (`process.py`, `pipes.py`); `HostLink` (`hostlink.py`) a host
that holds the agent while bridges come and go, whose records carry sequence numbers
(`last_seq`) and which can be let go without ending the agent (`detach`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.rpc.hostlink import HostPlan, attach, start_host
from bridge.rpc.pipes import Pipes
from bridge.rpc.process import spawn, terminate_group

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import Process, TaskGroup

    from bridge.rpc.framing import Frame
    from bridge.rpc.hostlink import TakeBack
    from bridge.rpc.process import AgentSpec

EXIT_WAIT = 5.0  # after stdout closes, for the process to be reaped
STDERR_WAIT = 1.0  # and for the rest of its stderr


class Link(Protocol):
    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stderr_tail(self) -> str: ...

    def start(self, tg: TaskGroup) -> None:
        """Start what runs beside the reader (a stderr drain)."""

    async def write(self, line: bytes) -> None: ...

    async def read(self, dispatch: Callable[[Frame], Awaitable[None]]) -> None: ...

    async def wait(self) -> int | None:
        """After `read` has returned: the exit code, once known."""

    async def terminate(self) -> int | None: ...


async def open_link(
    spec: AgentSpec,
    host: HostPlan | None,
    reattach: TakeBack | None,
    max_record: int,
) -> Link:
    """A host found again (`reattach`: its address, the last seq applied, and the
    records up to it a snapshot kept), a new host (`host`), or the agent as a plain
    child process."""
    if reattach is not None:
        address, after, *shown = reattach
        preface = shown[0] if shown else ()
        return await attach(address, after=after, max_record=max_record, shown=preface)
    if host is not None:
        return await start_host(spec, host, max_record)
    return await ProcessLink.open(spec, max_record)


class ProcessLink:
    """The agent as a child process of the bridge: it ends with the bridge."""

    def __init__(self, process: Process, max_record: int) -> None:
        self._process = process
        self._pipes = Pipes(process, max_record)

    @classmethod
    async def open(cls, spec: AgentSpec, max_record: int) -> ProcessLink:
        return cls(await spawn(spec), max_record)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def stderr_tail(self) -> str:
        return self._pipes.stderr_tail

    def start(self, tg: TaskGroup) -> None:
        tg.start_soon(self._pipes.drain_stderr)

    async def write(self, line: bytes) -> None:
        await self._pipes.write(line)

    async def read(self, dispatch: Callable[[Frame], Awaitable[None]]) -> None:
        await self._pipes.read(dispatch)

    async def wait(self) -> int | None:
        with anyio.move_on_after(EXIT_WAIT):
            await self._process.wait()
        with anyio.move_on_after(STDERR_WAIT):
            await self._pipes.stderr_done.wait()
        return self._process.returncode

    async def terminate(self) -> int | None:
        return await terminate_group(self._process)

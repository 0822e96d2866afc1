"""The agent process's three pipes, each with one owner.

stdin is written under one lock (a record is never interleaved with another);
stdout is read by one task and split into records (`framing.LineSplitter`);
stderr is drained by another into a bounded tail, kept for crash reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from bridge.rpc.framing import LineSplitter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import Process

    from bridge.rpc.framing import Frame

STDERR_TAIL_BYTES = 8192
# What a pipe of a process that went away raises; the caller learns why from its exit.
PIPE_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Pipes:
    def __init__(self, process: Process, max_record: int) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        self._stdin, self._stdout, self._stderr = process.stdin, process.stdout, process.stderr
        self._max_record = max_record
        self._lock = anyio.Lock()
        self._tail = bytearray()
        self.stderr_done = anyio.Event()

    @property
    def stderr_tail(self) -> str:
        return self._tail.decode("utf-8", errors="replace")

    async def write(self, line: bytes) -> None:
        """One whole record to stdin; raises one of `PIPE_GONE` if the agent is gone."""
        async with self._lock:
            await self._stdin.send(line)

    async def read(self, dispatch: Callable[[Frame], Awaitable[None]]) -> None:
        """Every stdout record, in order, to `dispatch`, until the agent closes it."""
        splitter = LineSplitter(self._max_record)
        try:
            async for chunk in self._stdout:
                for frame in splitter.feed(chunk):
                    await dispatch(frame)
        except PIPE_GONE:
            pass
        for frame in splitter.close():
            await dispatch(frame)

    async def drain_stderr(self) -> None:
        try:
            async for chunk in self._stderr:
                self._tail += chunk
                del self._tail[:-STDERR_TAIL_BYTES]
        except PIPE_GONE:
            pass
        finally:
            self.stderr_done.set()

"""The bridge's end of an agent host (`agenthost/`): start one, find one again, talk.

`start_host` starts the host for an `AgentSpec` (the host then starts the keeper and
the agent, as the bridge itself would) and connects; `attach` connects to a host a
bridge started earlier, after checking that the process it names is still that host
(`HostAddress`: its pid and the kernel's start time for it, so a reused pid is never
taken for a host). A `HostLink` is a `Link` whose records carry sequence numbers:
`last_seq` is the last one read, `ack` tells the host it may forget up to one, and
`detach` lets the host go on alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import anyio

from bridge.rpc.errors import AgentStartError
from bridge.rpc.framing import LineSplitter, OversizedRecord
from bridge.rpc.process import keeper_arguments
from bridge.rpc.shown import Shown

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from anyio.abc import SocketStream, TaskGroup

    from bridge.rpc.framing import Frame
    from bridge.rpc.process import AgentSpec

VERSION = 1
HOST = Path(__file__).with_name("agenthost")
READY_TIMEOUT = 15.0  # the host starts in ~50 ms; the keeper's fork follows at once
HELLO_TIMEOUT = 5.0
STOP_WAIT = 10.0  # the host closes stdin, SIGTERMs after 3 s, SIGKILLs 2 s later
FRAME_OVERHEAD = 32  # "<seq> " before a record


class HostGone(AgentStartError):
    """The host named is not there (any more): its agent is gone with it."""


@dataclass(frozen=True)
class HostPlan:
    """Where a new host listens, and how long it waits alone (`agenthost` options)."""

    socket: Path
    detach_timeout: float = 600.0
    run_limit: float = 7200.0


@dataclass(frozen=True)
class HostAddress:
    """How a bridge finds a host again: its socket, its pid and that pid's start time."""

    socket: str
    pid: int
    started: int


# A host to take back: its address, the last record applied, and optionally the
# records up to it a snapshot kept (read before the host's own).
TakeBack: TypeAlias = (
    "tuple[HostAddress, int] | tuple[HostAddress, int, Sequence[tuple[int, bytes]]]"
)


def process_start(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text("utf-8", "replace")
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


async def start_host(spec: AgentSpec, plan: HostPlan, max_record: int) -> HostLink:
    """Start a host for the agent of `spec` and connect to it."""
    flags, found, command = keeper_arguments(spec)
    socket = str(plan.socket)
    argv = [sys.executable, "-I", "-S", str(HOST), "--socket", socket]
    argv += ["--detach-timeout", f"{plan.detach_timeout:g}", "--run-limit", f"{plan.run_limit:g}"]
    argv += ["--", *flags, found, *command]
    plan.socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.cwd,
            env=dict(spec.env),
            start_new_session=True,  # neither the bridge's signals nor its group's reach it
        )
    except OSError as exc:
        raise AgentStartError(f"cannot start the agent's host: {exc}") from exc
    assert process.stdout is not None
    assert process.stderr is not None
    ready = b""
    with anyio.move_on_after(READY_TIMEOUT):
        async for chunk in process.stdout:
            ready += chunk
            if b"\n" in ready:
                break
    await process.wait()  # the parent half exits at once; the host lives on
    words = ready.split()
    if len(words) != 3 or words[0] != b"ready":
        why = b"".join([chunk async for chunk in process.stderr]).decode("utf-8", "replace")
        raise AgentStartError(f"the agent's host did not start: {why.strip()[-300:]}")
    pid = int(words[1])
    started = process_start(pid) or 0
    return await attach(HostAddress(socket, pid, started), after=0, max_record=max_record)


async def attach(
    address: HostAddress,
    *,
    after: int,
    max_record: int,
    shown: Sequence[tuple[int, bytes]] = (),
) -> HostLink:
    """Connect to the host at `address`, asking for every record after `after`;
    `shown`: the records up to `after` a snapshot kept (`shown.py`), read first."""
    if process_start(address.pid) != address.started:
        raise HostGone(f"the agent's host (pid {address.pid}) is gone")
    try:
        stream = await _connect(Path(address.socket))
    except OSError as exc:
        raise HostGone(f"the agent's host does not answer: {exc}") from exc
    link = HostLink(stream, address, after, max_record, shown)
    try:
        await link.hello()
    except BaseException:
        await stream.aclose()
        raise
    return link


async def _connect(path: Path) -> SocketStream:
    """A unix socket's path must fit in 108 bytes: a longer one is reached through a
    descriptor of its folder (`/proc/self/fd/<n>/<name>`), as the host bound it."""
    if len(os.fsencode(path)) < 100:
        return await anyio.connect_unix(path)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return await anyio.connect_unix(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


class HostLink:
    """One bridge's connection to one host."""

    def __init__(
        self,
        stream: SocketStream,
        address: HostAddress,
        after: int,
        max_record: int,
        shown: Sequence[tuple[int, bytes]] = (),
    ) -> None:
        self.address = address
        self._stream = stream
        self._after = after
        self._splitter = LineSplitter(max_record + FRAME_OVERHEAD)
        self._pending: list[Frame] = []  # frames that came with the hello
        self._lock = anyio.Lock()
        self._ended = anyio.Event()
        self._keeper = 0
        self.replay_end = 0
        self._last_seq = after
        self._preface = list(shown)
        # The records read since the last run that counts as shown, folded: what a
        # snapshot of this conversation keeps (bridge/conversation/hosts.py).
        self.shown = Shown()
        self._returncode: int | None = None
        self._stderr = ""

    async def hello(self) -> None:
        await self._stream.send(f"pi-host {VERSION} {self._after}\n".encode())
        with anyio.fail_after(HELLO_TIMEOUT):
            while not self._pending:
                chunk = await self._stream.receive()
                self._pending += self._splitter.feed(chunk)
        first = self._pending.pop(0)
        words = first.split() if isinstance(first, bytes) else []
        if len(words) != 6 or words[0] != b"pi-host":
            raise HostGone(f"not an agent host at {self.address.socket}")
        self._keeper = int(words[3])
        self.replay_end = int(words[5]) - 1  # the last record written before we came

    @property
    def pid(self) -> int:
        return self._keeper

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stderr_tail(self) -> str:
        return self._stderr

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def start(self, tg: TaskGroup) -> None:
        pass  # the host keeps the agent's stderr and sends its tail with the exit

    async def write(self, line: bytes) -> None:
        await self._send(b"w " + line)

    async def ack(self, seq: int) -> None:
        await self._send(b"ack %d\n" % seq)

    async def _send(self, data: bytes) -> None:
        async with self._lock:
            await self._stream.send(data)

    async def read(self, dispatch: Callable[[Frame], Awaitable[None]]) -> None:
        try:
            preface, self._preface = self._preface, []
            for seq, record in preface:
                self.shown.add(seq, record)
                await dispatch(record)
            pending, self._pending = self._pending, []
            if await self._frames(pending, dispatch):
                return
            async for chunk in self._stream:
                if await self._frames(self._splitter.feed(chunk), dispatch):
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the host went away (or we let it go): no exit to report
        finally:
            self._ended.set()

    async def _frames(
        self, frames: list[Frame], dispatch: Callable[[Frame], Awaitable[None]]
    ) -> bool:
        """Hand each record on; True once the host has told the agent's exit."""
        for frame in frames:
            if isinstance(frame, OversizedRecord):
                await dispatch(frame)
                continue
            head, _, rest = frame.partition(b" ")
            if head.isdigit():
                self._last_seq = seq = int(head)
                self.shown.add(seq, rest)
                await dispatch(rest)
            elif head == b"exit":
                code, _, tail = rest.partition(b" ")
                self._returncode = int(code) if code.lstrip(b"-").isdigit() else None
                self._stderr = str(json.loads(tail)) if tail else ""
                return True
        return False

    async def wait(self) -> int | None:
        await self._ended.wait()
        return self._returncode

    async def terminate(self) -> int | None:
        """End the agent: the host closes its stdin, then signals it."""
        try:
            await self._send(b"stop\n")
            with anyio.move_on_after(STOP_WAIT):
                await self._ended.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        await self._stream.aclose()
        return self._returncode

    async def detach(self) -> None:
        """Let the host go on alone; the agent keeps running."""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self._send(b"bye\n")
            # The host hangs up: the reader ends on its own, with no receive left
            # pending for the close to cut short.
            with anyio.move_on_after(1):
                await self._ended.wait()
        await self._stream.aclose()


def remove_stale(address: HostAddress) -> None:
    """A host that is gone may leave its socket behind; nothing else may be there."""
    if process_start(address.pid) != address.started:
        with_suffix = Path(address.socket)
        for path in (with_suffix, with_suffix.with_name(with_suffix.name + ".spill")):
            try:
                os.unlink(path)
            except OSError:
                continue

"""Commands in flight, each waiting for its response: the waiting side of
`correlation.py` (which decides, without I/O, which request a response answers).

A request waits under its own time limit; the agent's exit fails every one still
waiting (`fail_all`). The protocol probe at start is a request too: current
agents answer its `get_state`; the legacy agent answers nothing but an `error`
event for the junk line sent before it (`probe_answered_by_error`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from bridge.rpc.commands import GetState
from bridge.rpc.correlation import Answers, Correlation, Swallowed
from bridge.rpc.errors import CommandFailed, RequestTimeout, RpcError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bridge.rpc.commands import Command, Outgoing
    from bridge.rpc.events import Response

PROBE_ID = "probe-state"
# A line no agent parses: current agents answer it with a `parse` error response,
# the legacy agent with an `error` event, which is how it is recognised.
PROBE_LINE = b"pi-bridge-protocol-probe\n"


@dataclass
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    response: Response | None = None
    error: RpcError | None = None


class Requests:
    def __init__(self, write: Callable[[Outgoing], Awaitable[None]], timeout: float) -> None:
        self._write = write
        self._timeout = timeout
        self._pending: dict[str, _Pending] = {}
        self._correlation = Correlation()
        self._ids = itertools.count(1)
        self._probe: _Pending | None = None

    async def request(
        self, command: Command, *, limit: float | None = None, check: bool = True
    ) -> Response:
        """Send `command` and wait for its response (`math.inf`: no time limit)."""
        cid = command.id or f"{command.type}-{next(self._ids)}"
        command = command.model_copy(update={"id": cid})
        pending = self._open(cid, command.type)
        limit = self._timeout if limit is None else limit
        try:
            await self._write(command)
            with anyio.fail_after(None if math.isinf(limit) else limit):
                await pending.done.wait()
        except TimeoutError:
            raise RequestTimeout(command.type, limit) from None
        finally:
            self._close(cid)
        if pending.error is not None:
            raise pending.error
        assert pending.response is not None
        if check and not pending.response.success:
            raise CommandFailed(command.type, pending.response.error)
        return pending.response

    def answer(self, response: Response) -> bool:
        """Hand `response` to the request it answers; False: nobody waits for it."""
        routed = self._correlation.route(response)
        if isinstance(routed, Swallowed):
            return True
        pending = self._pending.get(routed.request_id) if isinstance(routed, Answers) else None
        if pending is None or pending.done.is_set():
            return False
        pending.response = response
        pending.done.set()
        return True

    def fail_all(self, error: RpcError) -> None:
        for pending in self._pending.values():
            pending.error = error
            pending.done.set()

    async def probe(
        self, write_line: Callable[[bytes], Awaitable[None]], limit: float
    ) -> Response | None:
        """The agent's answer to the protocol probe: its state, or None from the legacy
        agent. Raises TimeoutError after `limit` seconds of silence."""
        self._correlation.expect_parse_error()
        await write_line(PROBE_LINE)
        probe = self._probe = self._open(PROBE_ID, "get_state")
        try:
            await self._write(GetState(id=PROBE_ID))
            with anyio.fail_after(limit):
                await probe.done.wait()  # also set by the legacy agent's `error` event
        finally:
            self._close(PROBE_ID)
            self._probe = None
        if probe.error is not None:
            raise probe.error
        return probe.response

    def probe_answered_by_error(self) -> bool:
        """An `error` event arrived: while probing, the legacy agent's answer to the
        junk line (nobody else's business); otherwise an event like any other."""
        if self._probe is None:
            return False
        self._probe.done.set()
        return True

    def _open(self, cid: str, command_type: str) -> _Pending:
        pending = self._pending[cid] = _Pending()
        self._correlation.sent(cid, command_type)
        return pending

    def _close(self, cid: str) -> None:
        self._pending.pop(cid, None)
        self._correlation.forget(cid)

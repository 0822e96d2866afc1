"""Which request a response answers: the client's request table, with no I/O.

As h11 keeps its state machine apart from sockets, this keeps the bookkeeping of
requests apart from the pipes (`client.py` waits and writes). The rules
(docs/rpc.md, "Correlation by `id`, then by command name"):

- a response with an `id` answers the open request of that id, once; an `id` nobody
  is waiting for (timed out, answered already, never sent) makes it an orphan;
- 0.73.1 sends some error responses without an `id` (a command it could not parse
  its arguments of): those answer the oldest open request of the same command name;
- a line the agent cannot parse at all is answered by a `parse` error without an
  `id`; the client sends one such line on purpose (the protocol probe) and says so
  with `expect_parse_error`, so that exactly that many are swallowed, not reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.rpc.events import Response


@dataclass(frozen=True)
class Answers:
    """The response answers the open request `request_id`."""

    request_id: str


@dataclass(frozen=True)
class Swallowed:
    """The agent's answer to a line we sent on purpose: nobody's business."""


@dataclass(frozen=True)
class Orphan:
    """Nobody is waiting for this response (a late one, or one the agent made up)."""


Routed = Answers | Swallowed | Orphan


class Correlation:
    """The open requests (id → command name, in the order sent) and what answers them."""

    def __init__(self) -> None:
        self._open: dict[str, str] = {}
        self._answered: set[str] = set()
        self._parse_errors = 0

    def sent(self, request_id: str, command: str) -> None:
        self._open[request_id] = command

    def forget(self, request_id: str) -> None:
        """The request is over (answered, timed out or failed): its id no longer matches."""
        self._open.pop(request_id, None)
        self._answered.discard(request_id)

    def expect_parse_error(self) -> None:
        self._parse_errors += 1

    @property
    def waiting(self) -> list[str]:
        """Ids still without an answer, oldest first."""
        return [i for i in self._open if i not in self._answered]

    def route(self, response: Response) -> Routed:
        if response.id is not None:
            return self._answer(response.id if response.id in self.waiting else None)
        if response.command == "parse" and self._parse_errors:
            self._parse_errors -= 1
            return Swallowed()
        same = (i for i in self.waiting if self._open[i] == response.command)
        return self._answer(next(same, None))

    def _answer(self, request_id: str | None) -> Routed:
        if request_id is None:
            return Orphan()
        self._answered.add(request_id)
        return Answers(request_id)

"""The request table on its own: which open request each response answers."""

from __future__ import annotations

import pytest

from bridge.rpc.correlation import Answers, Correlation, Orphan, Routed, Swallowed
from bridge.rpc.events import Response


def response(command: str, id: str | None = None, success: bool = True) -> Response:
    return Response(type="response", command=command, id=id, success=success)


# (requests sent as (id, command), parse errors expected, responses in order, routed)
CASES: list[tuple[str, list[tuple[str, str]], int, list[Response], list[Routed]]] = [
    (
        "an id answers its own request",
        [("a", "get_state"), ("b", "get_state")],
        0,
        [response("get_state", "b"), response("get_state", "a")],
        [Answers("b"), Answers("a")],
    ),
    (
        "an id answers once; the second is an orphan",
        [("a", "abort")],
        0,
        [response("abort", "a"), response("abort", "a")],
        [Answers("a"), Orphan()],
    ),
    (
        "an unknown id is an orphan, not a match by command",
        [("a", "abort")],
        0,
        [response("abort", "zzz")],
        [Orphan()],
    ),
    (
        "an id-less error answers the oldest open request of its command",
        [("a", "set_model"), ("b", "prompt"), ("c", "set_model")],
        0,
        [response("set_model", success=False), response("set_model", success=False)],
        [Answers("a"), Answers("c")],
    ),
    (
        "an id-less error of a command nobody sent is an orphan",
        [("a", "prompt")],
        0,
        [response("set_model", success=False)],
        [Orphan()],
    ),
    (
        "the parse errors expected are swallowed, the next one is not",
        [("p", "get_state")],
        1,
        [response("parse", success=False), response("parse", success=False)],
        [Swallowed(), Orphan()],
    ),
    (
        "a parse error is never taken for a request's answer",
        [("a", "prompt")],
        0,
        [response("parse", success=False), response("prompt", "a")],
        [Orphan(), Answers("a")],
    ),
]


@pytest.mark.parametrize(
    ("sent", "parse_errors", "responses", "routed"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_response_is_routed_to_the_request_it_answers(
    sent: list[tuple[str, str]], parse_errors: int, responses: list[Response], routed: list[Routed]
) -> None:
    table = Correlation()
    for request_id, command in sent:
        table.sent(request_id, command)
    for _ in range(parse_errors):
        table.expect_parse_error()
    assert [table.route(r) for r in responses] == routed


def test_a_forgotten_request_is_matched_no_more() -> None:
    table = Correlation()
    table.sent("a", "get_state")
    table.forget("a")  # it timed out
    assert table.route(response("get_state", "a")) == Orphan()
    assert table.route(response("get_state")) == Orphan()
    assert table.waiting == []


def test_waiting_lists_the_unanswered_oldest_first() -> None:
    table = Correlation()
    for request_id in ("a", "b", "c"):
        table.sent(request_id, "get_state")
    table.route(response("get_state", "b"))
    assert table.waiting == ["a", "c"]

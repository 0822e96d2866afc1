"""The outbox's pure pieces, table-driven: what each platform failure leads to
(`bridge.outbox.recovery.recover`) and how a new op merges into its lane's queue
(`bridge.outbox.coalesce`). tests/outbox/test_outbox.py checks the same through a running
outbox on fake time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from bridge.model import AnswerPress, ChatRef, Delete, Edit, PlatformLimits, React, Send, Upload
from bridge.outbox.coalesce import absorb, catch_up, with_content
from bridge.outbox.lanes import Entry, Lane
from bridge.outbox.recovery import GiveUp, Retry, Tried, as_send, recover
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    TooLong,
    TransientError,
)

if TYPE_CHECKING:
    from bridge.model import Op

LIMITS = PlatformLimits(max_text=10, max_caption=5)
GIVE_UP = GiveUp  # expected: give up on the very error raised
FORMATTED = Send("a", "<b>hi</b>", plain="hi", markup="formatted")
FORMATTED_EDIT = Edit("a", "<i>v2</i>", "v2", "formatted")
LONG = Send("a", "x" * 25)
UPLOAD = Upload("f", "out.txt", b"data", caption="a long caption")
EDIT = Edit("a", "v2")


@dataclass(frozen=True)
class Case:
    name: str
    op: Op
    exc: PlatformError
    expected: Retry | type[GiveUp] | None
    tried: Tried = field(default_factory=Tried)
    max_retries: int = 5


CASES = [
    Case(
        "a rate limit waits its retry_after",
        Send("a", "hi"),
        RateLimited(3.0),
        Retry(Send("a", "hi"), 3.0),
    ),
    Case("a rate-limited edit waits too", EDIT, RateLimited(0.5), Retry(EDIT, 0.5)),
    Case("an edit that changes nothing is done", EDIT, NotModified("same"), None),
    Case("not modified on a send is a failure", Send("a", "x"), NotModified("?"), GIVE_UP),
    Case("an edit of a gone message sends anew", EDIT, MessageGone("gone"), Retry(as_send(EDIT))),
    Case(
        "an adopted message gone: the edit is done",
        EDIT,
        MessageGone("gone"),
        None,
        Tried(adopted=True),
    ),
    Case("a delete of a gone message is done", Delete("a"), MessageGone("gone"), None),
    Case("a send into a gone thread gives up", Send("a", "x"), MessageGone("gone"), GIVE_UP),
    Case(
        "refused markup is sent as its plain text",
        FORMATTED,
        BadFormatting("parse"),
        Retry(Send("a", "hi", markup="plain")),
    ),
    Case(
        "refused markup without plain text is sent as its text",
        Send("a", "<b>hi</b>", markup="formatted"),
        BadFormatting("parse"),
        Retry(Send("a", "<b>hi</b>", markup="plain")),
    ),
    Case(
        "a refused formatted edit goes as plain text",
        FORMATTED_EDIT,
        BadFormatting("parse"),
        Retry(Edit("a", "v2", markup="plain")),
    ),
    Case("plain text refused as markup gives up", Send("a", "x"), BadFormatting("?"), GIVE_UP),
    Case(
        "a send over the limit is cut",
        LONG,
        TooLong("long"),
        Retry(Send("a", "x" * 9 + "…"), clipped=True),
    ),
    Case(
        "a formatted send over the limit is cut as plain text",
        Send("a", "<b>" + "y" * 20 + "</b>", plain="y" * 20, markup="formatted"),
        TooLong("long"),
        Retry(Send("a", "y" * 9 + "…"), clipped=True),
    ),
    Case(
        "a cut that is still too long gives up", LONG, TooLong("long"), GIVE_UP, Tried(clipped=True)
    ),
    Case(
        "an upload's caption over the limit is cut",
        UPLOAD,
        TooLong("caption"),
        Retry(Upload("f", "out.txt", b"data", caption="a lo…"), clipped=True),
    ),
    Case(
        "an upload without caption too long gives up",
        Upload("f", "big", b"x"),
        TooLong("?"),
        GIVE_UP,
    ),
    Case("a delete too long gives up", Delete("a"), TooLong("?"), GIVE_UP),
    Case(
        "a first transient error retries after half a second",
        Send("a", "hi"),
        TransientError("502"),
        Retry(Send("a", "hi"), 0.5, transient=True),
    ),
    Case(
        "the back-off doubles with each try",
        Send("a", "hi"),
        TransientError("502"),
        Retry(Send("a", "hi"), 4.0, transient=True),
        Tried(transient_tries=3),
    ),
    Case(
        "the back-off is capped at 30 seconds",
        Send("a", "hi"),
        TransientError("502"),
        Retry(Send("a", "hi"), 30.0, transient=True),
        Tried(transient_tries=8),
        max_retries=10,
    ),
    Case(
        "transient errors past max_retries give up",
        Send("a", "hi"),
        TransientError("502"),
        GIVE_UP,
        Tried(transient_tries=5),
    ),
    Case(
        "a press answer is retried like any op",
        AnswerPress("p1", "ok"),
        TransientError("timeout"),
        Retry(AnswerPress("p1", "ok"), 0.5, transient=True),
    ),
    Case("a permanent error gives up", Send("a", "x"), PlatformError("blocked"), GIVE_UP),
    Case("a refused reaction gives up", React("m1", "done"), PlatformError("?"), GIVE_UP),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_recover_decides_what_a_platform_failure_leads_to(case: Case) -> None:
    outcome = recover(case.op, case.exc, case.tried, limits=LIMITS, max_retries=case.max_retries)
    expected = GiveUp(case.exc) if case.expected is GIVE_UP else case.expected
    assert outcome == expected


# --- coalescing ---------------------------------------------------------------------------

KEY, CHAT = "tg:1", ChatRef("1")


def lane_of(*ops: Op, in_flight: int | None = None) -> Lane:
    lane = Lane("1")
    lane.queue.extend(Entry(KEY, CHAT, op) for op in ops)
    if in_flight is not None:
        lane.queue[in_flight].in_flight = True
    return lane


@dataclass(frozen=True)
class MergeCase:
    name: str
    queued: list[Op]
    new: Op
    absorbed: bool
    left: list[Op]  # the queue afterwards, the new op not appended
    coalesced: int
    in_flight: int | None = None


MERGE_CASES = [
    MergeCase(
        "a newer edit replaces the queued one",
        [Edit("a", "v1")],
        Edit("a", "v2"),
        True,
        [Edit("a", "v2")],
        1,
    ),
    MergeCase(
        "an edit folds into its queued send, which keeps its settings",
        [Send("a", "v1", silent=True, force_reply=True)],
        Edit("a", "v2"),
        True,
        [Send("a", "v2", silent=True, force_reply=True)],
        1,
    ),
    MergeCase(
        "a wanted edit merged with a routine one is wanted",
        [Edit("a", "v1")],
        Edit("a", "v2", routine=True),
        True,
        [Edit("a", "v2")],
        1,
    ),
    MergeCase(
        "an edit of an in-flight op's slot queues behind it",
        [Edit("a", "v1")],
        Edit("a", "v2"),
        False,
        [Edit("a", "v1")],
        0,
        in_flight=0,
    ),
    MergeCase(
        "an edit of another slot queues",
        [Edit("a", "v1")],
        Edit("b", "v1"),
        False,
        [Edit("a", "v1")],
        0,
    ),
    MergeCase(
        "an edit behind a delete of its slot queues",
        [Delete("a")],
        Edit("a", "v1"),
        False,
        [Delete("a")],
        0,
    ),
    MergeCase(
        "a delete cancels the edits of its slot and queues",
        [Edit("a", "v1"), Send("b", "x"), Edit("a", "v2")],
        Delete("a"),
        False,
        [Send("b", "x")],
        2,
    ),
    MergeCase(
        "a delete cancels a queued send and itself",
        [Send("a", "v1"), Edit("a", "v2")],
        Delete("a"),
        True,
        [],
        3,
    ),
    MergeCase(
        "a delete cancels a queued upload and itself",
        [Upload("a", "f.txt", b"x")],
        Delete("a"),
        True,
        [],
        2,
    ),
    MergeCase(
        "a second delete of a slot queues", [Delete("a")], Delete("a"), False, [Delete("a")], 0
    ),
    MergeCase(
        "a send never merges", [Send("a", "v1")], Send("b", "v2"), False, [Send("a", "v1")], 0
    ),
]


@pytest.mark.parametrize("case", MERGE_CASES, ids=lambda c: c.name)
def test_absorb_merges_a_new_op_into_its_slots_queued_ops(case: MergeCase) -> None:
    lane = lane_of(*case.queued, in_flight=case.in_flight)
    before = list(lane.queue)
    merge = absorb(lane, Entry(KEY, CHAT, case.new))
    assert merge.absorbed == case.absorbed
    assert [entry.op for entry in lane.queue] == case.left
    assert merge.coalesced == case.coalesced
    assert all(entry in before and entry not in lane.queue for entry in merge.removed)


def test_catch_up_takes_in_the_newer_edit_queued_behind_an_op() -> None:
    lane = lane_of(Send("a", "v1"), Send("b", "x"), Edit("a", "v2"), Edit("a", "v3"))
    head = lane.queue[0]
    head.clipped = True
    taken = catch_up(lane, head)
    assert taken is not None
    assert taken.op == Edit("a", "v2")
    assert [entry.op for entry in lane.queue] == [Send("a", "v2"), Send("b", "x"), Edit("a", "v3")]
    assert not head.clipped  # new content: a cut made for the old text no longer applies


def test_catch_up_leaves_a_lane_without_a_newer_edit_alone() -> None:
    lane = lane_of(Send("a", "v1"), Delete("a"))
    assert catch_up(lane, lane.queue[0]) is None
    assert len(lane.queue) == 2


def test_with_content_only_merges_into_edits_and_sends() -> None:
    assert with_content(Delete("a"), Edit("a", "v2")) is None
    assert with_content(Edit("a", "v1", routine=True), Edit("a", "v2", routine=True)) == Edit(
        "a", "v2", routine=True
    )

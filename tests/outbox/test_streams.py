"""Native streams in the outbox: a growing text started, appended to and stopped as one
streamed message where the chat streams, posted and edited wherever it does not, and
shown whole and once whatever the platform does to the stream.

Driven through a real `Outbox` on fake time against the in-memory platform, which
streams like Slack's chat.startStream / appendStream / stopStream (`StreamingAdapter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from bridge.model import ChatRef, Delete, Edit, PlatformLimits, Send
from bridge.outbox.streams import extension, pieces
from bridge.platform import PlatformError, RateLimited, TransientError
from tests.support import marked_ops
from tests.support.marked_ops import growing, serving
from tests.support.recording_adapter import FakeClock, StreamingAdapter

if TYPE_CHECKING:
    from bridge.model import Op
    from bridge.outbox import Outbox

pytestmark = pytest.mark.anyio

KEY, CHAT = "slack:T1:C1:1.0", ChatRef("C1", thread_id="1.0")
FAST = PlatformLimits(chat_rate=100.0, edit_interval=0.0)


async def deliver(outbox: Outbox, ops: list[Op]) -> None:
    await marked_ops.deliver(outbox, KEY, CHAT, ops)


def calls(platform: StreamingAdapter) -> list[tuple[str, str]]:
    """(kind, text) of each call; a failed call's kind ends in "!"."""
    return [(c.kind + ("" if c.ok else "!"), c.text) for c in platform.calls]


def platform_for(clock: FakeClock, limits: PlatformLimits = FAST, **kw: object) -> StreamingAdapter:
    return StreamingAdapter(limits, clock=clock, sleep=clock.sleep, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Case:
    name: str
    ops: list[Op]
    calls: list[tuple[str, str]]
    shown: str  # the one message the chat shows at the end


CASES = [
    Case(
        "started, appended, stopped by the seal",
        growing("t", "I", "I will", "I will clean up."),
        [
            ("stream_start", "I"),
            ("stream_append", " will"),
            ("stream_append", " clean up."),
            ("stream_stop", ""),
        ],
        "I will clean up.",
    ),
    Case(
        "a final text stops the stream with what it adds",
        [Send("t", "I", draft=True), Edit("t", "I will", draft=True), Edit("t", "I will go")],
        [("stream_start", "I"), ("stream_append", " will"), ("stream_stop", " go")],
        "I will go",
    ),
    Case(
        "an unchanged draft appends nothing",
        [Send("t", "I", draft=True), Edit("t", "I", draft=True), Edit("t", "I", seal=True)],
        [("stream_start", "I"), ("stream_stop", "")],
        "I",
    ),
    Case(
        "a text that does not extend the stream stops it and is edited in",
        growing("t", "I think", "We know"),
        [("stream_start", "I think"), ("stream_stop", ""), ("edit", "We know")],
        "We know",
    ),
    Case(
        "formatted views stream their Markdown source",
        [
            Send("t", "*a*", plain="**a**", markup="formatted", draft=True),
            Edit("t", "*a* b", plain="**a** b", markup="formatted", seal=True),
        ],
        [("stream_start", "**a**"), ("stream_stop", " b")],
        "**a** b",
    ),
    Case(
        "a text sent whole is an ordinary message",
        [Send("t", "done"), Edit("t", "done!")],
        [("send", "done"), ("edit", "done!")],
        "done!",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_a_growing_text_streams_where_the_chat_streams(case: Case) -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, case.ops)
        assert outbox.streams.streamed(KEY, "t") is None  # ended and forgotten
    assert calls(platform) == case.calls
    assert platform.texts(CHAT) == [case.shown]
    assert not platform.streaming


async def test_a_chat_that_does_not_stream_posts_and_edits() -> None:
    clock = FakeClock()
    platform = platform_for(clock, stream_chats=frozenset({"elsewhere"}))
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("t", "I", "I will"))
    assert calls(platform) == [("send", "I"), ("edit", "I will")]
    assert platform.texts(CHAT) == ["I will"]


async def test_a_refused_stream_is_sent_at_once_and_the_chat_posts_and_edits_from_then_on() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    platform.refuse = PlatformError("missing_scope")
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("a", "first", "first words"))
        await deliver(outbox, growing("b", "second"))
        assert outbox.streams.refused == {CHAT.chat_id}
    assert calls(platform) == [
        ("stream_start!", "first"),  # asked once, not again
        ("send", "first"),
        ("edit", "first words"),
        ("send", "second"),
    ]
    assert platform.texts(CHAT) == ["first words", "second"]


@pytest.mark.parametrize(
    "error", [RateLimited(2.0), TransientError("timeout")], ids=["rate limit", "outage"]
)
async def test_a_stream_that_fails_like_any_call_is_retried_as_a_stream(error: Exception) -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    platform.fail_next("stream_start", error)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("a", "hi", "hi there"))
        assert outbox.streams.refused == set()
    assert [kind for kind, _ in calls(platform)] == [
        "stream_start!",
        "stream_start",
        "stream_append",
        "stream_stop",
    ]
    assert platform.texts(CHAT) == ["hi there"]


@pytest.mark.parametrize("ending", ["growing", "final"])
async def test_an_expired_stream_gets_the_full_text_once_by_an_ordinary_edit(ending: str) -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [Send("t", "I", draft=True), Edit("t", "I will", draft=True)])
        platform.expire(platform.last(CHAT).ref)  # Slack ends a stream after ~5 minutes
        last = Edit("t", "I will go", draft=ending == "growing")
        await deliver(outbox, [last, Edit("t", "I will go", seal=True)])
        assert outbox.streams.streamed(KEY, "t") is None
    failed = "stream_append!" if ending == "growing" else "stream_stop!"
    assert calls(platform)[2:] == [(failed, " go"), ("edit", "I will go")]
    assert platform.texts(CHAT) == ["I will go"]
    assert outbox.stats.dropped == 0


async def test_a_streaming_message_deleted_is_stopped_first() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [Send("t", "I", draft=True), Delete("t")])
        assert outbox.streams.streamed(KEY, "t") is None
    assert [kind for kind, _ in calls(platform)] == ["stream_start", "stream_stop", "delete"]
    assert platform.texts(CHAT) == []


async def test_an_append_over_the_length_limit_goes_in_pieces() -> None:
    clock = FakeClock()
    platform = platform_for(clock, PlatformLimits(chat_rate=100.0, edit_interval=0.0, max_text=10))
    text = "0123456789" * 3
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [Send("t", "ab", draft=True), Edit("t", "ab" + text, draft=True)])
        await deliver(outbox, [Edit("t", "ab" + text + "!")])
    assert [kind for kind, _ in calls(platform)] == [
        "stream_start",
        *["stream_append"] * 3,
        "stream_stop",
    ]
    assert platform.texts(CHAT) == ["ab" + text + "!"]


def test_an_extension_is_what_a_text_adds_and_none_when_it_rewrites() -> None:
    assert extension("I will", "I will go") == " go"
    assert extension("I will", "I will") == ""
    assert extension("I will", "We will") is None
    assert pieces("abcde", 2) == ["ab", "cd", "e"]
    assert pieces("", 2) == []


async def test_past_the_start_budget_an_answer_is_posted_and_edited_and_stops_wait_their_turn() -> (
    None
):
    # Slack's chat.startStream / stopStream are Tier 2 (20 a minute): here one start a
    # minute after a burst of one, so the second answer finds no start to spare.
    tier = PlatformLimits(chat_rate=100.0, edit_interval=0.0, stream_rate=1 / 60, stream_burst=1)
    clock = FakeClock()
    platform = platform_for(clock, tier)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("a", "one", "one two"))
        stopped_at = clock()
        await deliver(outbox, growing("b", "three", "three four"))
        await deliver(outbox, growing("c", "five"))
    kinds = [kind for kind, _ in calls(platform)]
    assert kinds == ["stream_start", "stream_append", "stream_stop", "send", "edit", "send"]
    assert not any(kind.endswith("!") for kind in kinds)  # nothing refused, nothing lost
    assert platform.texts(CHAT) == ["one two", "three four", "five"]
    assert stopped_at < 60  # the first stop went at once: the start did not take its turn

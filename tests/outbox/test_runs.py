"""A run's ops in one native stream (`bridge/outbox/runs.py`): its texts appended one
after the other, its tool calls as task cards, the stream stopped by the run's final
status or by the next run; rolled over when the platform ends it, left to ordinary
messages where the chat does not stream or refuses, paced by the append budget, and
the thread's status line naming the running tool.

Driven through a real `Outbox` on fake time against the in-memory platform, which
streams like Slack's chat.startStream / appendStream / stopStream (`StreamingAdapter`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from bridge.model import ChatRef, Edit, PlatformLimits, Send, Task
from bridge.outbox.coalesce import with_content
from bridge.outbox.runs import HOLD_LIMIT
from bridge.platform import PlatformError, RateLimited
from tests.support import marked_ops
from tests.support.marked_ops import serving
from tests.support.recording_adapter import FakeClock, StreamingAdapter

if TYPE_CHECKING:
    from bridge.model import MessageRef, Op, TaskStatus
    from bridge.outbox import Outbox

pytestmark = pytest.mark.anyio

KEY = "slack:T1:C1:1.0"
THREAD, CHANNEL = ChatRef("C1", thread_id="1.0"), ChatRef("C1")
FAST = PlatformLimits(chat_rate=100.0, edit_interval=0.0)
RUN = "run:1"
OPENING = Send("status:1", "⏳ working…", silent=True)  # the live status: no run mark
DONE = "✅ done"
ICONS: dict[TaskStatus, str] = {"in_progress": "🔧", "complete": "✅", "error": "❌"}


# --- the renderer's ops, by hand --------------------------------------------------------


def said(
    slot: str,
    text: str,
    *,
    edit: bool = False,
    draft: bool = False,
    seal: bool = False,
    run: str = RUN,
) -> Op:
    """A run's text op: a Send of the slot's first view, an Edit of a later one."""
    if edit:
        return Edit(slot, text, draft=draft, seal=seal, run=run)
    assert not seal  # a Send has nothing to seal
    return Send(slot, text, draft=draft, run=run)


def card(call: str, status: TaskStatus, output: str = "") -> Task:
    return Task(call, f"bash {call}", status, output)


def tool(call: str, status: TaskStatus, output: str = "", *, edit: bool | None = None) -> Op:
    """A tool call's message op carrying its card: a Send at the start, Edits after."""
    body = f"{ICONS[status]} bash {call}" + (f"\n{output}" if output else "")
    task = card(call, status, output)
    if edit if edit is not None else status != "in_progress":
        return Edit(f"tool:{call}", body, run=RUN, task=task)
    return Send(f"tool:{call}", body, silent=True, run=RUN, task=task)


def over(text: str = DONE, *, run: str = RUN, slot: str = "status:1") -> Edit:
    """The run's final status: ends its stream."""
    return Edit(slot, text, run=run, run_over=True)


# A run as the renderer emits it in verbosity "all": an answer that grows, two tool
# calls (one fails), a second answer, the final status.
A_RUN: list[Op] = [
    OPENING,
    said("text:1:1:0", "fi", draft=True),
    said("text:1:1:0", "first", edit=True, draft=True),
    said("text:1:1:0", "first", edit=True, seal=True),
    tool("a", "in_progress"),
    tool("a", "complete", "ok"),
    tool("b", "in_progress"),
    tool("b", "error", "boom"),
    said("text:1:2:0", "second"),
    over(),
]


# --- inspection ----------------------------------------------------------------------------


def platform_for(clock: FakeClock, limits: PlatformLimits = FAST, **kw: object) -> StreamingAdapter:
    return StreamingAdapter(limits, clock=clock, sleep=clock.sleep, **kw)  # type: ignore[arg-type]


def calls(platform: StreamingAdapter) -> list[tuple[str, str]]:
    """(kind, text) of each call; a failed call's kind ends in "!"."""
    return [(c.kind + ("" if c.ok else "!"), c.text) for c in platform.calls]


def started(platform: StreamingAdapter) -> list[MessageRef]:
    """The streamed messages, oldest first."""
    return [c.ref for c in platform.calls_of("stream_start", ok=True) if c.ref is not None]


def states(platform: StreamingAdapter) -> dict[str, list[TaskStatus]]:
    """Each task id's card states as sent, over every stream, in order."""
    out: dict[str, list[TaskStatus]] = {}
    for ref in started(platform):
        for task_id, sent in platform.cards.get(ref, {}).items():
            out.setdefault(task_id, []).extend(t.status for t in sent)
    return out


async def deliver(outbox: Outbox, ops: list[Op], chat: ChatRef = THREAD) -> None:
    await marked_ops.deliver(outbox, KEY, chat, ops)


# --- one run, one stream ---------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    ops: list[Op]
    calls: list[tuple[str, str]]
    texts: list[str]  # the chat's messages at the end, oldest first
    cards: dict[str, list[TaskStatus]] = field(default_factory=dict)
    stream_chats: frozenset[str] | None = None  # None: every chat streams
    refuse: bool = False  # the platform refuses every stream


CARD = ("stream_append", "")  # an append that carries only a card

CASES = [
    Case(
        "texts and tool cards in one stream, stopped before the final status",
        A_RUN,
        [
            ("send", "⏳ working…"),
            ("stream_start", "fi"),
            ("stream_append", "rst"),
            CARD,  # a: in progress
            CARD,  # a: complete
            CARD,  # b: in progress
            CARD,  # b: error
            ("stream_append", "\n\nsecond"),
            ("stream_stop", ""),
            ("edit", DONE),
        ],
        [DONE, "first\n\nsecond"],
        {"a": ["in_progress", "complete"], "b": ["in_progress", "error"]},
    ),
    Case(
        "a run opening with a tool call starts its stream with the card",
        [
            OPENING,
            tool("a", "in_progress"),
            tool("a", "complete", "ok"),
            said("text:1:1:0", "after"),
            over(),
        ],
        [
            ("send", "⏳ working…"),
            ("stream_start", ""),
            CARD,
            ("stream_append", "after"),  # the stream's first text: no blank line before
            ("stream_stop", ""),
            ("edit", DONE),
        ],
        [DONE, "after"],
        {"a": ["in_progress", "complete"]},
    ),
    Case(
        "an op of the next run stops the live run's stream first",
        [
            said("text:1:1:0", "one"),
            said("text:2:2:0", "two", run="run:2"),
            over(run="run:2", slot="status:2"),
        ],
        [
            ("stream_start", "one"),
            ("stream_stop", ""),
            ("stream_start", "two"),
            ("stream_stop", ""),
            ("send", DONE),  # status:2 has no message yet: its Edit is sent
        ],
        ["one", "two", DONE],
    ),
    Case(
        "a text that no longer extends its slot closes the stream and is posted whole",
        [
            OPENING,
            said("text:1:1:0", "I think", draft=True),
            said("text:1:1:0", "We know", edit=True),
            over(),
        ],
        [
            ("send", "⏳ working…"),
            ("stream_start", "I think"),
            ("stream_stop", ""),
            ("send", "We know"),
            ("edit", DONE),
        ],
        [DONE, "I think", "We know"],
    ),
    Case(
        "a chat that does not stream posts and edits every op, tool calls as messages",
        A_RUN,
        [
            ("send", "⏳ working…"),
            ("send", "fi"),
            ("edit", "first"),  # the seal needs no call: the message shows it all
            ("send", "🔧 bash a"),
            ("edit", "✅ bash a\nok"),
            ("send", "🔧 bash b"),
            ("edit", "❌ bash b\nboom"),
            ("send", "second"),
            ("edit", DONE),
        ],
        [DONE, "first", "✅ bash a\nok", "❌ bash b\nboom", "second"],
        stream_chats=frozenset(),
    ),
    Case(
        "a refused stream is asked for once, then every op is posted and edited",
        A_RUN,
        [
            ("send", "⏳ working…"),
            ("stream_start!", "fi"),
            ("send", "fi"),
            ("edit", "first"),
            ("send", "🔧 bash a"),
            ("edit", "✅ bash a\nok"),
            ("send", "🔧 bash b"),
            ("edit", "❌ bash b\nboom"),
            ("send", "second"),
            ("edit", DONE),
        ],
        [DONE, "first", "✅ bash a\nok", "❌ bash b\nboom", "second"],
        refuse=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_a_run_streams_as_one_message_where_the_chat_streams(case: Case) -> None:
    clock = FakeClock()
    platform = platform_for(clock, stream_chats=case.stream_chats)
    if case.refuse:
        platform.refuse = PlatformError("missing_scope")
    async with serving(platform, clock) as outbox:
        await deliver(outbox, case.ops)
        assert outbox.streams.run_of(KEY) is None  # the run's stream is over
    assert calls(platform) == case.calls
    assert platform.texts(THREAD) == case.texts
    assert states(platform) == case.cards
    assert not platform.streaming
    assert outbox.stats.dropped == 0


async def test_the_run_stream_holds_the_texts_and_the_cards_keyed_by_task_id() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, A_RUN)
    [ref] = started(platform)
    assert platform.messages[ref].text == "first\n\nsecond"
    assert platform.cards[ref] == {
        "a": [card("a", "in_progress"), card("a", "complete", "ok")],
        "b": [card("b", "in_progress"), card("b", "error", "boom")],
    }
    assert [c.kind for c in platform.calls if c.ref == ref][-1] == "stream_stop"
    assert platform.calls[-1].kind == "edit"  # the final status, after the stop
    assert not [c for c in platform.calls_of("send") if c.text.startswith(("🔧", "✅", "❌"))]


async def test_a_run_submitted_all_at_once_merges_into_its_stream_and_loses_nothing() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [OPENING])
        outbox.submit(KEY, THREAD, A_RUN[1:])
        await outbox.flush()
        assert outbox.streams.run_of(KEY) is None
    [ref] = started(platform)
    assert platform.messages[ref].text == "first\n\nsecond"
    finals = {task_id: sent[-1] for task_id, sent in platform.cards[ref].items()}
    assert finals == {"a": card("a", "complete", "ok"), "b": card("b", "error", "boom")}
    assert platform.texts(THREAD) == [DONE, "first\n\nsecond"]
    assert [c.kind for c in platform.calls[-2:]] == ["stream_stop", "edit"]
    assert not platform.streaming


async def test_a_final_status_merged_into_a_queued_refresh_still_ends_the_run_last() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [OPENING, said("text:1:1:0", "fi", draft=True)])
        refresh = Edit("status:1", "⏳ working… · 1 s", routine=True)
        outbox.submit(KEY, THREAD, [refresh, *A_RUN[2:]])  # the chat's lane is behind
        await outbox.flush()
        assert outbox.streams.run_of(KEY) is None
    assert not platform.streaming  # every stream stopped
    assert len(started(platform)) == 1
    assert platform.texts(THREAD) == [DONE, "first\n\nsecond"]


# --- the platform ends a stream ----------------------------------------------------------------


async def test_an_expired_run_stream_rolls_over_with_the_rest_and_the_running_cards() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(
            outbox,
            [
                OPENING,
                said("text:1:1:0", "I", draft=True),
                said("text:1:1:0", "I will", edit=True, draft=True),
                tool("a", "in_progress"),
                tool("b", "in_progress"),
                tool("b", "complete", "fine"),
            ],
        )
        first = platform.last(THREAD).ref
        platform.expire(first)  # Slack ends a stream after about five minutes
        await deliver(
            outbox,
            [
                said("text:1:1:0", "I will go", edit=True, draft=True),
                tool("a", "complete", "ok"),
                said("text:1:1:0", "I will go on.", edit=True),
                over(),
            ],
        )
    one, two = started(platform)
    assert (one, two) == (first, platform.last(THREAD).ref)
    assert ("stream_append!", " go") in calls(platform)
    assert platform.calls_of("stream_start")[1].text == " go"  # the rest, not the whole
    assert platform.messages[one].text + platform.messages[two].text == "I will go on."
    # The call still running goes on in the new stream; the one ended stays behind.
    assert platform.cards[two] == {"a": [card("a", "in_progress"), card("a", "complete", "ok")]}
    assert list(platform.cards[one]) == ["a", "b"]
    assert [c.kind for c in platform.calls if c.ref == two][-1] == "stream_stop"
    assert platform.texts(THREAD) == [DONE, "I will", " go on."]
    assert outbox.stats.dropped == 0


async def test_a_roll_over_at_a_new_text_starts_without_the_blank_line() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [said("text:1:1:0", "first")])
        platform.expire(platform.last(THREAD).ref)
        await deliver(outbox, [said("text:1:2:0", "second"), over()])
    one, two = started(platform)
    assert calls(platform)[1:3] == [("stream_append!", "\n\nsecond"), ("stream_start", "second")]
    assert [platform.messages[one].text, platform.messages[two].text] == ["first", "second"]


async def test_a_refused_stream_leaves_the_whole_text_once_in_ordinary_messages() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    platform.refuse = PlatformError("not_allowed_token_type")
    ops = [
        said("text:1:1:0", "Hello", draft=True),
        said("text:1:1:0", "Hello, wor", edit=True, draft=True),
        said("text:1:1:0", "Hello, world.", edit=True),
        over(),
    ]
    async with serving(platform, clock) as outbox:
        await deliver(outbox, ops)
        assert outbox.streams.refused == {THREAD.chat_id}
    kinds = [kind for kind, _ in calls(platform)]
    assert kinds == ["stream_start!", "send", "edit", "edit", "send"]
    assert platform.texts(THREAD) == ["Hello, world.", DONE]
    assert sum(m.text.count("Hello") for m in platform.messages.values()) == 1


# --- the stream goes on as it began ------------------------------------------------------------


async def test_a_run_text_posted_for_want_of_a_start_is_edited_not_streamed_anew() -> None:
    tier = PlatformLimits(chat_rate=100.0, edit_interval=0.0, stream_rate=1 / 60, stream_burst=1)
    clock = FakeClock()
    platform = platform_for(clock, tier)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [said("text:1:1:0", "one"), over(slot="status:x")])
        await deliver(outbox, [said("text:2:2:0", "two", run="run:2", draft=True)])
        await clock.sleep(61)  # a start is to spare again
        await deliver(outbox, [said("text:2:2:0", "two more", run="run:2", edit=True)])
    assert calls(platform)[3:] == [("send", "two"), ("edit", "two more")]
    assert sum("two" in m.text for m in platform.messages.values()) == 1


async def test_a_run_text_posted_whole_after_a_rewrite_is_edited_from_then_on() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(
            outbox,
            [
                said("text:1:1:0", "I think", draft=True),
                said("text:1:1:0", "We know", edit=True, draft=True),
                said("text:1:1:0", "We know more", edit=True),
            ],
        )
    assert calls(platform) == [
        ("stream_start", "I think"),
        ("stream_stop", ""),
        ("send", "We know"),
        ("edit", "We know more"),
    ]


# --- the thread's status line -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chat", "statuses"),
    [
        (THREAD, ["is running bash a…", "is running bash b…", ""]),
        (CHANNEL, []),  # a channel's top level has no status line
    ],
    ids=["thread", "no thread"],
)
async def test_the_status_line_names_the_running_tool_and_is_cleared_with_the_stream(
    chat: ChatRef, statuses: list[str]
) -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, A_RUN[:6], chat)
        assert [text for _, text in platform.statuses] == statuses[:1]
        await deliver(outbox, A_RUN[6:], chat)
    assert platform.statuses == [(chat, text) for text in statuses]


async def test_the_status_line_is_cleared_when_a_roll_over_fails() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [said("text:1:1:0", "first"), tool("a", "in_progress")])
        platform.expire(platform.last(THREAD).ref)
        platform.refuse = PlatformError("missing_scope")
        await deliver(outbox, [tool("a", "complete", "ok"), over()])
    assert platform.texts(THREAD) == ["first", "✅ bash a\nok", DONE]
    assert platform.statuses == [(THREAD, "is running bash a…"), (THREAD, "")]


# --- the append budget ------------------------------------------------------------------------


async def test_appends_keep_to_their_budget_and_newer_text_merges_while_they_wait() -> None:
    rate, burst = 1.0, 1
    tier = PlatformLimits(chat_rate=100.0, edit_interval=0.0, append_rate=rate, append_burst=burst)
    clock = FakeClock()
    platform = platform_for(clock, tier)
    words = [f"w{n}" for n in range(60)]
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [said("text:1:1:0", words[0], draft=True)])
        for n in range(2, len(words) + 1):  # ten edits a second, each submitted at once
            text = " ".join(words[:n])
            outbox.submit(KEY, THREAD, [said("text:1:1:0", text, edit=True, draft=True)])
            await clock.sleep(0.1)
        await deliver(outbox, [said("text:1:1:0", " ".join(words), edit=True), over()])
    appends = [c.at for c in platform.calls_of("stream_append")]
    assert 3 <= len(appends) < len(words) // 3  # they grew instead of multiplying
    for i, first in enumerate(appends):
        for j in range(i, len(appends)):
            assert j - i + 1 <= burst + rate * (appends[j] - first) + 1e-9
    [ref] = started(platform)
    assert platform.messages[ref].text == " ".join(words)


# --- merging keeps the end of a run -------------------------------------------------------------


@pytest.mark.parametrize(
    ("queued", "newer", "run_over"),
    [
        (Edit("s", "a", run=RUN, run_over=True), Edit("s", "b", run=RUN), True),
        (Edit("s", "a", run=RUN), Edit("s", "b", run=RUN, run_over=True), True),
        (Send("s", "a", run=RUN, run_over=True), Edit("s", "b", run=RUN), True),
        (Send("s", "a", run=RUN), Edit("s", "b", run=RUN, run_over=True), True),
        (Edit("s", "a", run=RUN, run_over=True), Edit("s", "a", seal=True), True),
        (Send("s", "a", run=RUN, draft=True), Edit("s", "a", seal=True, run_over=True), True),
        (Edit("s", "a", run=RUN), Edit("s", "b", run=RUN), False),
        (Send("s", "a", run=RUN), Edit("s", "b", run=RUN, seal=True), False),
    ],
    ids=[
        "edit over, newer edit",
        "newer edit over",
        "send over, newer edit",
        "newer edit over a send",
        "edit over, newer seal",
        "seal over a draft send",
        "neither edit over",
        "neither over, seal",
    ],
)
def test_a_merged_op_keeps_the_end_of_its_run(queued: Op, newer: Edit, run_over: bool) -> None:
    merged = with_content(queued, newer)
    assert isinstance(merged, Send | Edit)
    assert merged.run_over is run_over
    assert type(merged) is type(queued)


def test_a_send_merged_with_a_newer_edit_carries_the_edits_card() -> None:
    newer = tool("a", "complete", "ok")
    assert isinstance(newer, Edit)
    merged = with_content(tool("a", "in_progress"), newer)
    assert merged == Send(
        "tool:a",
        "✅ bash a\nok",
        silent=True,
        run=RUN,
        task=card("a", "complete", "ok"),
    )


# --- a run's first text waits for a start ---------------------------------------------------

ELSEWHERE = ChatRef("C2", thread_id="2.0")
OTHER_KEY = "slack:T1:C2:2.0"


# One start, then one every `every` seconds.
def starts_every(every: float) -> PlatformLimits:
    return PlatformLimits(chat_rate=100.0, edit_interval=0.0, stream_rate=1 / every)


async def _take_the_start(outbox: Outbox) -> None:
    """Run 1 in C1 streams, taking the only start there is."""
    await deliver(outbox, [said("text:1:1:0", "one", draft=True)])


async def test_a_first_text_without_a_start_waits_and_streams_all_it_gathered() -> None:
    clock = FakeClock()
    platform = platform_for(clock, starts_every(6.0))
    async with serving(platform, clock) as outbox:
        await _take_the_start(outbox)
        growing = [said("text:1:1:0", "a", draft=True)]
        growing.append(said("text:1:1:0", "a b", edit=True, draft=True))
        outbox.submit(OTHER_KEY, ELSEWHERE, growing)
        await outbox.flush()
    [start] = [c for c in platform.calls_of("stream_start") if c.chat == ELSEWHERE]
    assert start.text == "a b"  # the whole text gathered while it waited
    assert start.at >= 6.0  # when the next start was spare
    assert [c.kind for c in platform.calls if c.chat == ELSEWHERE] == ["stream_start"]


async def test_a_held_text_whose_message_ends_first_is_posted_whole_once() -> None:
    clock = FakeClock()
    platform = platform_for(clock, starts_every(600.0))
    async with serving(platform, clock) as outbox:
        await _take_the_start(outbox)
        outbox.submit(OTHER_KEY, ELSEWHERE, [said("text:1:1:0", "a", draft=True)])
        await clock.sleep(5.0)
        assert [c for c in platform.calls if c.chat == ELSEWHERE] == []  # still waiting
        rest = [said("text:1:1:0", "a b", edit=True, draft=True)]
        rest.append(said("text:1:1:0", "a b", edit=True, seal=True))
        outbox.submit(OTHER_KEY, ELSEWHERE, rest)
        await outbox.flush()
    assert [(c.kind, c.text) for c in platform.calls if c.chat == ELSEWHERE] == [("send", "a b")]


async def test_a_held_text_goes_as_a_message_after_the_hold_limit() -> None:
    clock = FakeClock()
    platform = platform_for(clock, starts_every(600.0))
    async with serving(platform, clock) as outbox:
        await _take_the_start(outbox)
        outbox.submit(OTHER_KEY, ELSEWHERE, [said("text:1:1:0", "a", draft=True)])
        await outbox.flush()
    [send] = [c for c in platform.calls if c.chat == ELSEWHERE]
    assert (send.kind, send.text) == ("send", "a")
    assert send.at >= HOLD_LIMIT


async def test_other_conversations_of_the_chat_pass_a_held_text() -> None:
    clock = FakeClock()
    platform = platform_for(clock, starts_every(600.0))
    neighbour = ChatRef("C1", thread_id="3.0")
    async with serving(platform, clock) as outbox:
        await _take_the_start(outbox)
        outbox.submit(
            "slack:T1:C1:2.0", ChatRef("C1", thread_id="2.0"), [said("t", "a", draft=True)]
        )
        outbox.submit("slack:T1:C1:3.0", neighbour, [Send("notice:1", "hello")])
        await clock.sleep(1.0)
        assert [(c.kind, c.text) for c in platform.calls if c.chat == neighbour] == [
            ("send", "hello")
        ]
        await outbox.flush()
    assert platform.texts("C1")[-2:] == ["hello", "a"]  # the held one went last


async def test_a_stop_refused_for_a_while_is_made_again_and_the_run_still_ends() -> None:
    clock = FakeClock()
    platform = platform_for(clock)
    platform.fail_next("stream_stop", RateLimited(2.0))
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [OPENING, said("text:1:1:0", "hello", draft=True), over()])
    assert [k for k, _ in calls(platform)] == [
        "send",
        "stream_start",
        "stream_stop!",
        "stream_stop",
        "edit",
    ]
    assert platform.streaming == set()

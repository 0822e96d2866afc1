"""Drafts in the outbox: a growing text shown as a draft where the chat takes drafts,
sent as a real message when sealed, and posted and edited wherever drafts are refused.

Driven through a real `Outbox` on fake time against the in-memory platform, which
shows drafts like Telegram's `sendMessageDraft` (`DraftingAdapter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from bridge.model import ChatRef, Edit, PlatformLimits, Send
from bridge.outbox.drafts import draft_id
from bridge.platform import BadFormatting, PlatformError, RateLimited, TransientError
from tests.support import marked_ops
from tests.support.marked_ops import growing, serving
from tests.support.recording_adapter import DraftingAdapter, FakeClock, RecordingAdapter

if TYPE_CHECKING:
    from bridge.model import Op
    from bridge.outbox import Outbox

pytestmark = pytest.mark.anyio

KEY, CHAT = "tg:100", ChatRef("100")
GROUP = ChatRef("-200", is_group=True)
FAST = PlatformLimits(chat_rate=100.0, edit_interval=0.0)


async def deliver(outbox: Outbox, ops: list[Op], chat: ChatRef = CHAT) -> None:
    await marked_ops.deliver(outbox, KEY, chat, ops)


def kinds(platform: RecordingAdapter) -> list[str]:
    return [c.kind + ("!" if not c.ok else "") for c in platform.calls]


@dataclass(frozen=True)
class Case:
    name: str
    drafting: bool  # the platform shows drafts at all
    chat: ChatRef
    calls: list[str]


CASES = [
    Case("drafts, then the real message", True, CHAT, ["draft", "draft", "draft", "send"]),
    Case("no drafts on the platform: post and edit", False, CHAT, ["send", "edit", "edit"]),
    Case("a chat without drafts: post and edit", True, GROUP, ["send", "edit", "edit"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_a_growing_text_is_drafted_where_the_chat_takes_drafts(case: Case) -> None:
    clock = FakeClock()
    drafts = frozenset({CHAT.chat_id})
    platform = (
        DraftingAdapter(FAST, clock=clock, sleep=clock.sleep, draft_chats=drafts)
        if case.drafting
        else RecordingAdapter(FAST, clock=clock, sleep=clock.sleep)
    )
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("t", "I", "I will", "I will clean up."), case.chat)
    assert kinds(platform) == case.calls
    assert platform.texts(case.chat) == ["I will clean up."]  # the message, once


async def test_drafts_keep_one_id_per_slot_and_the_message_replaces_them() -> None:
    clock = FakeClock()
    platform = DraftingAdapter(FAST, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("a", "one", "one two") + growing("b", "three"))
    ids = [i for i, _ in platform.drafts[CHAT.chat_id]]
    assert ids == [draft_id(KEY, "a")] * 2 + [draft_id(KEY, "b")]
    assert 0 not in ids
    assert draft_id(KEY, "a") != draft_id(KEY, "b")
    assert platform.texts(CHAT) == ["one two", "three"]


async def test_a_refused_draft_is_sent_at_once_and_the_chat_posts_and_edits_from_then_on() -> None:
    clock = FakeClock()
    platform = DraftingAdapter(FAST, clock=clock, sleep=clock.sleep)
    platform.refuse = PlatformError("Bad Request: drafts are not available")
    async with serving(platform, clock) as outbox:
        await deliver(outbox, growing("a", "first", "first words"))
        await deliver(outbox, growing("b", "second"))
        assert outbox.drafts.refused == {CHAT.chat_id}
    assert kinds(platform) == ["draft!", "send", "edit", "send"]  # asked once, not again
    assert platform.texts(CHAT) == ["first words", "second"]


@pytest.mark.parametrize(
    "error",
    [RateLimited(2.0), TransientError("timeout"), BadFormatting("can't parse entities")],
    ids=["rate limit", "outage", "formatting"],
)
async def test_a_draft_that_fails_like_any_call_is_retried_as_a_draft(error: Exception) -> None:
    clock = FakeClock()
    platform = DraftingAdapter(FAST, clock=clock, sleep=clock.sleep)
    platform.fail_next("draft", error)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [Send("a", "*hi*", plain="hi", markup="formatted", draft=True)])
        assert outbox.drafts.refused == set()
    assert kinds(platform) == ["draft!", "draft"]


async def test_a_seal_merged_into_a_queued_draft_sends_its_text_once() -> None:
    clock = FakeClock()
    platform = DraftingAdapter(FAST, clock=clock, sleep=clock.sleep)
    platform.fail_next("draft", RateLimited(5.0))
    async with serving(platform, clock) as outbox:
        outbox.submit(KEY, CHAT, [Send("a", "I", draft=True)])
        await clock.advance(0.1)  # the draft drew a 429; newer text queues meanwhile
        outbox.submit(KEY, CHAT, [Edit("a", "I will", draft=True), Edit("a", "I will", seal=True)])
        await outbox.flush()
    assert kinds(platform) == ["draft!", "send"]
    assert platform.texts(CHAT) == ["I will"]


async def test_a_seal_of_a_message_already_showing_its_text_makes_no_call() -> None:
    clock = FakeClock()
    platform = RecordingAdapter(FAST, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [Send("a", "done", draft=True), Edit("a", "done", seal=True)])
        assert outbox.pending(KEY) == 0
    assert kinds(platform) == ["send"]
    assert outbox.stats.dropped == 0


async def test_the_message_follows_its_last_draft_at_once_but_messages_keep_the_chat_rate() -> None:
    clock = FakeClock()
    paced = PlatformLimits(chat_rate=1.0, edit_interval=1.0)
    platform = DraftingAdapter(paced, clock=clock, sleep=clock.sleep)
    async with serving(platform, clock) as outbox:
        await deliver(outbox, [Send("a", "I will", draft=True)])
        await clock.advance(0.2)
        await deliver(outbox, [Edit("a", "I will", seal=True), Send("b", "next message")])
    drafted, sent, following = (c.at for c in platform.calls)
    assert sent - drafted == pytest.approx(0.2, abs=0.01)  # a draft is no chat message
    assert following - sent >= 1.0  # two messages: one a second, as the chat allows

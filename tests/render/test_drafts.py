"""The renderer marks a streamed answer as a draft while it grows and seals it when done.

Where the chat shows drafts (Telegram's `sendMessageDraft`), the outbox shows ops
marked `draft` as a draft and sends the real message at the seal; elsewhere the marks
change nothing (tests/outbox/test_drafts.py). Here: which ops carry them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.model import Edit, PlatformLimits, Send
from bridge.render.text import DRAFT_REFRESH
from bridge.rpc.signals import AgentGone, RunStarted
from tests.render.test_renderer import Session, delta, end, event, start

if TYPE_CHECKING:
    from bridge.model import Op


def text_ops(ops: list[Op], slot: str | None = None) -> list[Send | Edit]:
    return [
        op
        for op in ops
        if isinstance(op, Send | Edit) and op.slot.startswith("text:") and slot in (None, op.slot)
    ]


def test_an_answer_is_a_draft_while_it_grows_and_sealed_when_its_message_ends() -> None:
    session = Session()
    grew = session.feed(RunStarted(), start(), delta("I"))
    grew += session.feed(delta(" will clean"), step=1.5)
    assert [op.draft for op in text_ops(grew)] == [True, True]
    ended = session.feed(end("I will clean"))
    [seal] = text_ops(ended)
    assert isinstance(seal, Edit)
    assert seal.seal
    assert not seal.draft
    assert seal.text == "I will clean"  # the text as last shown, final


def test_a_final_text_that_differs_from_the_last_draft_is_an_ordinary_edit() -> None:
    session = Session()
    session.feed(RunStarted(), start(), delta("I will"))
    [final] = text_ops(session.feed(end("I will clean the build directory.")))
    assert isinstance(final, Edit)
    assert not final.draft
    assert not final.seal
    assert final.text == "I will clean the build directory."


def test_only_the_last_chunk_of_a_long_answer_is_a_draft() -> None:
    session = Session(PlatformLimits(max_text=60))
    text = "\n\n".join(f"Paragraph {n} " + "word " * 6 for n in range(4))
    ops = session.feed(RunStarted(), start(), delta(text))
    latest = {op.slot: op.draft for op in text_ops(ops)}
    slots = sorted(latest)
    assert len(slots) >= 2
    assert [latest[s] for s in slots] == [False] * (len(slots) - 1) + [True]


def test_a_stalled_draft_is_shown_again_before_the_platform_forgets_it() -> None:
    session = Session()
    session.feed(RunStarted(), start(), delta("thinking aloud"))
    assert text_ops(session.tick(DRAFT_REFRESH / 2)) == []
    [again] = text_ops(session.tick(DRAFT_REFRESH / 2 + 0.1))
    assert isinstance(again, Edit)
    assert again.draft
    assert again.routine
    assert again.text == "thinking aloud"
    assert text_ops(session.tick(1.0)) == []  # once per refresh period, not every tick


def test_an_answer_cut_off_by_the_agents_exit_is_sealed_so_its_words_are_sent() -> None:
    session = Session()
    session.feed(RunStarted(), start(), delta("half an answer"))
    [seal] = text_ops(session.feed(AgentGone(1, "boom")))
    assert isinstance(seal, Edit)
    assert not seal.draft
    assert seal.text.startswith("half an answer")


def test_a_finished_answer_is_never_left_a_draft_and_never_refreshed() -> None:
    session = Session(PlatformLimits(max_text=40))
    pieces = [f"piece {n} of a longer answer. " for n in range(6)]
    ops = session.feed(RunStarted(), event(type="agent_start"), start())
    ops += session.feed(*(delta(p) for p in pieces), step=0.5)
    ops += session.feed(end("".join(pieces)), event(type="agent_end", messages=[]))
    last = {op.slot: op for op in text_ops(ops)}
    assert len(last) >= 2
    assert not any(op.draft for op in last.values())
    assert text_ops(session.tick(DRAFT_REFRESH + 1)) == []

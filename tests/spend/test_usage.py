"""What is kept of an agent's answer: its usage, under an id its replay has again."""

from __future__ import annotations

import pytest

from bridge.rpc.content import AssistantMessage, Usage
from bridge.spend.usage import UsageEntry, UsageTotals, chat_name, entry_of, message_id


def answer(timestamp: int | None = 1700000000123, total: object = 0.25) -> AssistantMessage:
    usage = Usage(input=100, output=20, cacheRead=5, cacheWrite=1, cost={"total": total})  # type: ignore[dict-item]
    return AssistantMessage(role="assistant", usage=usage, timestamp=timestamp)


def test_an_answer_and_its_replay_have_one_id_and_two_answers_two() -> None:
    first = answer()
    replayed = AssistantMessage.model_validate_json(first.model_dump_json())
    assert message_id(first) == message_id(replayed)
    assert message_id(first) != message_id(answer(timestamp=1700000000124))
    # No timestamp (an agent that sends none): the message itself names it.
    assert message_id(answer(None)) == message_id(answer(None))
    assert message_id(answer(None)).startswith("h:")


@pytest.mark.parametrize(
    ("total", "cost"), [(0.25, 0.25), (0, 0.0), (float("nan"), 0.0), (-1.0, 0.0)]
)
def test_the_cost_kept_is_the_reported_total_or_nothing(total: object, cost: float) -> None:
    entry = entry_of(answer(total=total), key="tg:1", person="42", chat="tg:1", at=5.0)
    assert entry is not None
    assert (entry.input, entry.output, entry.cache_read, entry.cache_write) == (100, 20, 5, 1)
    assert entry.cost == cost


def test_an_answer_without_usage_keeps_nothing() -> None:
    bare = AssistantMessage(role="assistant")
    assert entry_of(bare, key="tg:1", person="42", chat="tg:1", at=5.0) is None


def test_totals_add_up_the_entries() -> None:
    entries = [
        UsageEntry(key="k", message=str(i), person="p", chat="c", at=0, input=i, cost=0.5)
        for i in range(1, 4)
    ]
    assert UsageTotals.of(entries) == UsageTotals(messages=3, input=6, cost=1.5)
    assert UsageTotals.of(entries).tokens == 6


@pytest.mark.parametrize(
    ("key", "chat_id", "name"),
    [
        ("tg:-100123:7", "-100123", "tg:-100123"),
        ("slack:T1:C2:1700.1", "C2", "slack:C2"),
        ("discord:9:10:11", "10", "discord:10"),
    ],
)
def test_a_chat_is_named_by_platform_and_chat_id(key: str, chat_id: str, name: str) -> None:
    assert chat_name(key, chat_id) == name

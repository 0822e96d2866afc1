"""The store's usage and raised limits, on sqlite and a real redis-server: one entry per
agent message however often it is added, sums per conversation, person and chat since
a time, and allowances that add up atomically."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.spend.usage import UsageEntry, UsageTotals
from tests.store.test_store import T0, backend, redis_server, store

if TYPE_CHECKING:
    from bridge.store import Store
    from tests.store.test_store import Backend

pytestmark = pytest.mark.anyio
__all__ = ["backend", "redis_server", "store"]  # the contract suite's fixtures, both backends


def entry(message: str, **changes: object) -> UsageEntry:
    fields: dict[str, object] = {
        "key": "tg:1",
        "message": message,
        "person": "42",
        "chat": "tg:1",
        "at": T0,
        "input": 100,
        "output": 20,
        "cache_read": 5,
        "cache_write": 1,
        "cost": 0.25,
    }
    fields.update(changes)
    return UsageEntry.model_validate(fields)


async def test_a_message_is_kept_once_however_often_it_is_added(backend: Backend) -> None:
    store = backend.store
    assert await store.add_usage(entry("m1")) is True
    assert await store.add_usage(entry("m1")) is False
    # Another replica (a worker replaying the same run) adds nothing either.
    again = await backend.open_again()
    assert await again.add_usage(entry("m1", at=T0 + 5)) is False
    totals = await store.usage_totals("person", "42", T0 - 1)
    assert totals == UsageTotals(
        messages=1, input=100, output=20, cache_read=5, cache_write=1, cost=0.25
    )


async def test_racing_adds_of_one_message_keep_it_once(backend: Backend) -> None:
    replicas = [backend.store, await backend.open_again(), await backend.open_again()]
    results: list[bool] = []

    async def add(store: Store) -> None:
        results.append(await store.add_usage(entry("m1")))

    async with anyio.create_task_group() as tg:
        for replica in replicas:
            tg.start_soon(add, replica)
    assert sorted(results) == [False, False, True]


async def test_totals_are_summed_by_subject_from_a_time_on(store: Store) -> None:
    await store.add_usage(entry("a", at=T0 - 100, cost=1.0))
    await store.add_usage(entry("b", at=T0, cost=0.5, key="tg:1:7"))
    await store.add_usage(entry("c", at=T0 + 10, cost=0.25, person="7"))
    await store.add_usage(entry("d", at=T0 + 20, cost=2.0, chat="slack:C1", key="slack:T:C1:1"))
    # The same message id in another conversation is another message.
    await store.add_usage(entry("a", at=T0 + 30, cost=4.0, key="tg:2", chat="tg:2"))

    async def cost(scope: str, name: str, since: float) -> float:
        return (await store.usage_totals(scope, name, since)).cost  # type: ignore[arg-type]

    assert await cost("person", "42", T0 - 100) == pytest.approx(7.5)
    assert await cost("person", "42", T0) == pytest.approx(6.5)
    assert await cost("person", "7", 0) == pytest.approx(0.25)
    assert await cost("chat", "tg:1", 0) == pytest.approx(1.75)
    assert await cost("chat", "tg:1", T0 + 1) == pytest.approx(0.25)
    assert await cost("conversation", "tg:1", 0) == pytest.approx(1.25)
    assert await cost("conversation", "tg:1:7", 0) == pytest.approx(0.5)
    assert await cost("conversation", "nobody", 0) == 0.0
    assert (await store.usage_totals("person", "42", 0)).messages == 4


async def test_a_raised_limit_adds_up_and_is_read_back_by_name(backend: Backend) -> None:
    store = backend.store
    assert await store.raised("person:42:2026-11-27") == 0.0
    assert await store.raise_limit("person:42:2026-11-27", 0.5) == pytest.approx(0.5)
    again = await backend.open_again()
    assert await again.raise_limit("person:42:2026-11-27", 0.25) == pytest.approx(0.75)
    assert await store.raised("person:42:2026-11-27") == pytest.approx(0.75)
    assert await store.raised("person:42:2026-11-28") == 0.0

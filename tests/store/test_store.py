"""The store contract, run against both backends: sqlite and a real redis-server.

Every test that takes `store` (or `backend`) runs twice. The redis runs need
`redis-server` on PATH; without it they fail with the command that installs it.
sqlite runs on a fake clock that `pass_time` advances; redis keeps its own time, so
there `pass_time` really sleeps (the ttls in these tests are fractions of a second).
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import pytest
from pydantic import ValidationError

from bridge.model import ConversationSettings
from bridge.store import (
    SQLITE_FILENAME,
    AuditEntry,
    ConversationRecord,
    DialogRecord,
    LiveRunRecord,
    RedisStore,
    SqliteStore,
    Store,
    StoreError,
    open_store,
)
from bridge.store.base import redact_url
from bridge.store.redis import DEFAULT_PREFIX
from bridge.store.schedule_record import ScheduleRecord
from bridge.store.sqlite import _MIGRATIONS, PURGE_INTERVAL, SCHEMA_VERSION
from tests.support.redis_server import INSTALL_HINT, RedisServer, redis_server_bin

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

KEY = "tg:123"
OTHER = "slack:T1:C1:1700.1"
T0 = 1_700_000_000.0


class FakeClock:
    """A clock the sqlite store reads; tests move it forward by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """One store under test plus what the contract tests need around it."""

    name: str
    url: str
    data_dir: Path
    clock: FakeClock
    store: Store
    others: list[Store] = field(default_factory=list)

    async def open_again(self) -> Store:
        """Another store on the same data: a second replica, or the bridge after a restart."""
        again = await open_store(self.url, self.data_dir, clock=self.clock)
        self.others.append(again)
        return again

    async def pass_time(self, seconds: float) -> None:
        if self.name == "sqlite":
            self.clock.now += seconds
        else:
            await anyio.sleep(seconds)

    async def aclose(self) -> None:
        for store in (self.store, *self.others):
            await store.aclose()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the whole session; tests keep apart by key prefix."""
    if redis_server_bin() is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["sqlite", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    data_dir = tmp_path / "data"
    if name == "sqlite":
        url = "sqlite"
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        url = f"{server.url}?prefix=test-{uuid.uuid4().hex}:"
    clock = FakeClock()
    under_test = Backend(name, url, data_dir, clock, await open_store(url, data_dir, clock=clock))
    try:
        yield under_test
    finally:
        await under_test.aclose()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store


def conversation(key: str = KEY, **changes: object) -> ConversationRecord:
    fields: dict[str, object] = {
        "key": key,
        "workspace": f"/data/workspaces/{key}",
        "session_dir": f"/data/sessions/{key}",
        "created_at": T0,
        "last_active": T0,
    }
    return ConversationRecord.model_validate({**fields, **changes})


def dialog(
    token: str,
    request_id: str = "req-1",
    key: str = KEY,
    *,
    choice: str | None = None,
    at: float = T0,
) -> DialogRecord:
    return DialogRecord(
        token=token, key=key, request_id=request_id, method="select", choice=choice, created_at=at
    )


def entry(n: int, key: str = KEY) -> AuditEntry:
    return AuditEntry(
        at=T0 + n, key=key, user_id=f"u{n}", request_id=f"req-{n}", choice="yes", title=f"#{n}"
    )


def live_run(key: str = KEY, message_id: str = "17", **changes: object) -> LiveRunRecord:
    fields: dict[str, object] = {
        "key": key,
        "chat_id": key.split(":")[1],
        "message_id": message_id,
        "started_at": T0,
    }
    return LiveRunRecord.model_validate({**fields, **changes})


# --- conversations ------------------------------------------------------------------------


async def test_a_conversation_round_trips_with_its_settings(store: Store) -> None:
    record = conversation(
        session_file="/data/sessions/tg:123/2024.jsonl",
        owner="42",
        approvers=["42", "43"],
        settings=ConversationSettings(
            busy_policy="ask", verbosity="compact", model="fake/fake-model", thinking="high"
        ),
        last_active=T0 + 5,
    )
    await store.put_conversation(record)
    assert await store.get_conversation(KEY) == record


async def test_an_unknown_conversation_is_none(store: Store) -> None:
    assert await store.get_conversation("tg:nobody") is None


async def test_putting_a_conversation_again_overwrites_it(store: Store) -> None:
    await store.put_conversation(conversation())
    updated = conversation(settings=ConversationSettings(verbosity="off"), last_active=T0 + 60)
    await store.put_conversation(updated)
    assert await store.get_conversation(KEY) == updated
    assert await store.list_conversations() == [updated]


async def test_conversations_are_listed_sorted_by_key(store: Store) -> None:
    keys = ["tg:2", OTHER, "tg:1:topic", KEY]
    for key in keys:
        await store.put_conversation(conversation(key))
    assert [c.key for c in await store.list_conversations()] == sorted(keys)


async def test_deleting_a_conversation_drops_it_and_its_dialogs_only(store: Store) -> None:
    await store.put_conversation(conversation(KEY))
    await store.put_conversation(conversation(OTHER))
    await store.put_dialogs([dialog("a1"), dialog("a2")])
    await store.put_dialogs([dialog("b1", key=OTHER)])
    await store.delete_conversation(KEY)
    assert await store.get_conversation(KEY) is None
    assert await store.get_dialog("a1") is None
    assert await store.dialogs_for(KEY) == []
    assert not await store.take_dialog("req-1", KEY)
    assert [c.key for c in await store.list_conversations()] == [OTHER]
    assert [d.token for d in await store.dialogs_for(OTHER)] == ["b1"]


async def test_deleting_an_unknown_conversation_does_nothing(store: Store) -> None:
    await store.delete_conversation("tg:nobody")
    assert await store.list_conversations() == []


# --- dialogs ------------------------------------------------------------------------------


async def test_a_dialog_token_round_trips(store: Store) -> None:
    record = DialogRecord(
        token="tok-yes",
        key=KEY,
        request_id="req-1",
        method="confirm",
        title="Run rm -rf build?",
        choice="yes",
        requester="42",
        expires_at=T0 + 300,
        message_chat="123",
        message_thread="7",
        message_slot="dialog:req-1",
        created_at=T0,
    )
    await store.put_dialogs([record])
    assert await store.get_dialog("tok-yes") == record
    assert await store.get_dialog("tok-unknown") is None
    written_before_the_rename = {**record.model_dump(exclude={"message_slot"}), "message_id": "s"}
    assert DialogRecord.model_validate(written_before_the_rename).message_slot == "s"


async def test_taking_a_dialog_removes_all_its_tokens_and_no_others(store: Store) -> None:
    await store.put_dialogs([dialog("y", choice="yes"), dialog("n", choice="no")])
    await store.put_dialogs([dialog("other", "req-2")])
    assert await store.take_dialog("req-1", KEY)
    assert await store.get_dialog("y") is None
    assert await store.get_dialog("n") is None
    assert await store.get_dialog("other") is not None
    assert [d.token for d in await store.dialogs_for(KEY)] == ["other"]


async def test_a_dialog_can_be_taken_only_once(store: Store) -> None:
    await store.put_dialogs([dialog("y")])
    assert await store.take_dialog("req-1", KEY)
    assert not await store.take_dialog("req-1", KEY)


async def test_taking_an_unknown_dialog_is_false(store: Store) -> None:
    await store.put_dialogs([dialog("y")])
    assert not await store.take_dialog("req-404", KEY)
    assert not await store.take_dialog("req-1", OTHER)
    assert await store.get_dialog("y") is not None


async def test_exactly_one_of_ten_concurrent_takers_wins(store: Store) -> None:
    await store.put_dialogs([dialog("y", choice="yes"), dialog("n", choice="no")])
    results: list[bool] = []

    async def take() -> None:
        results.append(await store.take_dialog("req-1", KEY))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(take)
    assert sorted(results) == [False] * 9 + [True]


async def test_exactly_one_taker_wins_across_two_stores_on_the_same_data(
    backend: Backend,
) -> None:
    replica = await backend.open_again()
    results: list[bool] = []

    async def take(store: Store) -> None:
        results.append(await store.take_dialog("req-1", KEY))

    for round_ in range(5):
        results.clear()
        await backend.store.put_dialogs([dialog(f"y{round_}"), dialog(f"n{round_}")])
        async with anyio.create_task_group() as tg:
            for store in [backend.store, replica] * 4:
                tg.start_soon(take, store)
        assert sorted(results) == [False] * 7 + [True]


async def test_dialogs_for_lists_a_conversations_tokens_in_order(store: Store) -> None:
    await store.put_dialogs([dialog("late", "req-3", at=T0 + 2)])
    await store.put_dialogs([dialog("b2", "req-b", at=T0 + 1), dialog("b1", "req-b", at=T0 + 1)])
    await store.put_dialogs([dialog("a1", "req-a", at=T0 + 1)])
    await store.put_dialogs([dialog("first", "req-9", at=T0)])
    await store.put_dialogs([dialog("elsewhere", "req-1", OTHER)])
    tokens = [d.token for d in await store.dialogs_for(KEY)]
    assert tokens == ["first", "a1", "b2", "b1", "late"]
    assert await store.dialogs_for("tg:nobody") == []


async def test_putting_a_token_again_replaces_it_and_moves_it_last(store: Store) -> None:
    await store.put_dialogs([dialog("x", choice="one"), dialog("y", choice="two")])
    await store.put_dialogs([dialog("x", choice="three")])
    found = await store.dialogs_for(KEY)
    assert [(d.token, d.choice) for d in found] == [("y", "two"), ("x", "three")]
    assert await store.take_dialog("req-1", KEY)
    assert await store.dialogs_for(KEY) == []


async def test_putting_no_dialogs_is_allowed(store: Store) -> None:
    await store.put_dialogs([])
    assert await store.dialogs_for(KEY) == []


def test_a_token_longer_than_a_button_payload_is_rejected() -> None:
    dialog("x" * 64)
    with pytest.raises(ValidationError, match=r"token must be 1\.\.64 bytes"):
        dialog("é" * 33)  # 66 bytes in UTF-8
    with pytest.raises(ValidationError, match="token must be"):
        dialog("")


# --- dedupe -------------------------------------------------------------------------------


async def test_seen_is_false_the_first_time_and_true_after(store: Store) -> None:
    assert not await store.seen("tg:update:1", 60)
    assert await store.seen("tg:update:1", 60)
    assert await store.seen("tg:update:1", 60)
    assert not await store.seen("tg:update:2", 60)


async def test_a_seen_key_is_forgotten_after_its_ttl(backend: Backend) -> None:
    store = backend.store
    assert not await store.seen("event", 0.3)
    await backend.pass_time(0.1)
    assert await store.seen("event", 0.3)
    await backend.pass_time(0.3)
    assert not await store.seen("event", 0.3)
    assert await store.seen("event", 0.3)


async def test_exactly_one_of_ten_concurrent_seen_calls_is_first(backend: Backend) -> None:
    replica = await backend.open_again()
    results: list[bool] = []

    async def check(store: Store) -> None:
        results.append(await store.seen("slack:Ev1", 60))

    async with anyio.create_task_group() as tg:
        for store in [backend.store, replica] * 5:
            tg.start_soon(check, store)
    assert sorted(results) == [False] + [True] * 9


@pytest.mark.parametrize("ttl", [0, -1.0, float("nan")])
async def test_seen_refuses_a_ttl_that_is_not_positive(store: Store, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl must be positive"):
        await store.seen("event", ttl)


# --- audit --------------------------------------------------------------------------------


async def test_the_audit_log_is_newest_first_and_limited(store: Store) -> None:
    for n in range(5):
        await store.audit(entry(n))
    assert [e.title for e in await store.audit_log()] == ["#4", "#3", "#2", "#1", "#0"]
    assert [e.title for e in await store.audit_log(limit=2)] == ["#4", "#3"]
    assert await store.audit_log(limit=0) == []
    assert (await store.audit_log())[0] == entry(4)


async def test_the_audit_log_filters_by_conversation(store: Store) -> None:
    await store.audit(entry(1, KEY))
    await store.audit(entry(2, OTHER))
    await store.audit(entry(3, KEY))
    assert [e.title for e in await store.audit_log(KEY)] == ["#3", "#1"]
    assert [e.title for e in await store.audit_log(OTHER)] == ["#2"]
    assert [e.title for e in await store.audit_log()] == ["#3", "#2", "#1"]
    assert await store.audit_log("tg:nobody") == []


async def test_the_audit_log_outlives_its_conversation(store: Store) -> None:
    await store.put_conversation(conversation())
    await store.audit(entry(1))
    await store.delete_conversation(KEY)
    assert await store.audit_log(KEY) == [entry(1)]


# --- restart ------------------------------------------------------------------------------


async def test_everything_survives_closing_and_reopening_the_store(backend: Backend) -> None:
    record = conversation(owner="42", settings=ConversationSettings(busy_policy="follow_up"))
    await backend.store.put_conversation(record)
    await backend.store.put_dialogs([dialog("y"), dialog("n")])
    await backend.store.audit(entry(1))
    await backend.store.put_live_run(live_run())
    assert not await backend.store.seen("event", 60)
    await backend.store.aclose()

    reopened = await backend.open_again()
    assert await reopened.get_conversation(KEY) == record
    assert [d.token for d in await reopened.dialogs_for(KEY)] == ["y", "n"]
    assert await reopened.audit_log() == [entry(1)]
    assert await reopened.seen("event", 60)
    assert await reopened.take_dialog("req-1", KEY)
    assert await reopened.live_runs() == [live_run()]


async def test_closing_a_store_twice_is_harmless(store: Store) -> None:
    await store.aclose()
    await store.aclose()


# --- live runs --------------------------------------------------------------------------


async def test_a_live_run_round_trips_and_runs_are_listed_by_key(store: Store) -> None:
    topic = live_run("tg:123:9", thread_id="9", is_group=True, working_on=["41"])
    for record in (live_run(OTHER, "1700.2"), live_run(), topic):
        await store.put_live_run(record)
    assert await store.live_runs() == [live_run(OTHER, "1700.2"), live_run(), topic]


def test_a_live_run_recorded_before_reactions_were_kept_still_reads() -> None:
    earlier = '{"key":"tg:1","chat_id":"1","message_id":"17","started_at":0.0}'
    assert LiveRunRecord.model_validate_json(earlier).working_on == []


async def test_a_conversations_next_live_run_replaces_its_earlier_one(store: Store) -> None:
    await store.put_live_run(live_run(message_id="17"))
    await store.put_live_run(live_run(message_id="23", started_at=T0 + 60))
    assert await store.live_runs() == [live_run(message_id="23", started_at=T0 + 60)]


async def test_a_live_run_is_dropped_only_while_it_names_that_message(store: Store) -> None:
    await store.put_live_run(live_run(message_id="17"))
    await store.put_live_run(live_run(OTHER, "17"))
    assert not await store.drop_live_run(KEY, "16")  # an earlier run's message
    assert not await store.drop_live_run("tg:nobody", "17")
    assert await store.drop_live_run(KEY, "17")
    assert not await store.drop_live_run(KEY, "17")
    assert await store.live_runs() == [live_run(OTHER, "17")]


async def test_a_live_run_outlives_its_conversation(store: Store) -> None:
    # Its status message is still in the chat, with a button, after the record is gone.
    await store.put_conversation(conversation())
    await store.put_live_run(live_run())
    await store.delete_conversation(KEY)
    assert await store.live_runs() == [live_run()]


# --- sqlite specifics ---------------------------------------------------------------------


async def test_sqlite_records_its_schema_version_and_uses_wal(tmp_path: Path) -> None:
    store = await open_store("sqlite", tmp_path, clock=FakeClock())
    await store.aclose()
    with sqlite3.connect(tmp_path / SQLITE_FILENAME) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


async def test_sqlite_refuses_a_file_written_by_a_newer_bridge(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this bridge"):
        await open_store(f"sqlite://{path}", tmp_path)


async def test_sqlite_upgrades_a_file_from_before_live_runs_and_keeps_its_data(
    tmp_path: Path,
) -> None:
    path = tmp_path / SQLITE_FILENAME
    conn = sqlite3.connect(path)
    conn.executescript(_MIGRATIONS[0])
    conn.execute(
        "INSERT INTO conversations (key, record) VALUES (?, ?)",
        (KEY, conversation().model_dump_json()),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = await open_store("sqlite", tmp_path, clock=FakeClock())
    try:
        assert await store.get_conversation(KEY) == conversation()
        await store.put_live_run(live_run())
        assert await store.live_runs() == [live_run()]
    finally:
        await store.aclose()


async def test_sqlite_purges_expired_dedupe_keys_from_the_file(tmp_path: Path) -> None:
    clock = FakeClock()
    store = await open_store("sqlite", tmp_path, clock=clock)

    def stored_keys() -> list[str]:
        conn = sqlite3.connect(tmp_path / SQLITE_FILENAME)
        try:
            return [row[0] for row in conn.execute("SELECT dedupe_key FROM dedupe ORDER BY 1")]
        finally:
            conn.close()

    try:
        assert not await store.seen("short", 1)
        assert not await store.seen("long", PURGE_INTERVAL * 10)
        clock.now += PURGE_INTERVAL
        assert not await store.seen("new", 1)
        assert stored_keys() == ["long", "new"]
    finally:
        await store.aclose()


@pytest.mark.parametrize("content", [None, b"this is not a database, just some bytes"])
async def test_a_sqlite_path_that_cannot_hold_a_database_is_a_store_error(
    tmp_path: Path, content: bytes | None
) -> None:
    # A file where the data dir should be, or a file that is not sqlite.
    target = tmp_path / "blocked"
    target.write_bytes(content or b"")
    url = f"sqlite://{target}" if content else "sqlite"
    with pytest.raises(StoreError, match="cannot open the sqlite store"):
        await open_store(url, target / "data")


async def test_a_closed_sqlite_store_says_so(tmp_path: Path) -> None:
    store = await open_store("sqlite", tmp_path)
    await store.aclose()
    with pytest.raises(StoreError, match="is closed"):
        await store.get_conversation(KEY)


# --- redis specifics ----------------------------------------------------------------------


async def test_the_redis_audit_log_keeps_the_newest_entries_up_to_its_cap(
    redis_server: RedisServer,
) -> None:
    store = await RedisStore.open(redis_server.url, prefix=f"cap-{uuid.uuid4().hex}:", audit_cap=3)
    try:
        for n in range(5):
            await store.audit(entry(n, KEY if n % 2 else OTHER))
        assert [e.title for e in await store.audit_log(limit=10)] == ["#4", "#3", "#2"]
        assert [e.title for e in await store.audit_log(OTHER)] == ["#4", "#2", "#0"]
    finally:
        await store.aclose()


async def test_an_unreachable_redis_is_a_store_error_that_hides_the_password(
    tmp_path: Path,
) -> None:
    from tests.support.loopback import free_port

    url = f"redis://bridge:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(StoreError, match="cannot reach the redis store") as raised:
        await open_store(url, tmp_path)
    assert "hunter2" not in str(raised.value)
    assert raised.value.__cause__ is None


async def test_an_unreachable_redis_hides_a_password_given_as_a_query_parameter(
    tmp_path: Path,
) -> None:
    from tests.support.loopback import free_port

    url = f"redis://127.0.0.1:{free_port()}/0?password=hunter2&prefix=team-a:"
    with pytest.raises(StoreError, match="cannot reach the redis store") as raised:
        await open_store(url, tmp_path)
    assert "hunter2" not in str(raised.value)
    assert "prefix=team-a:" in str(raised.value)  # what is not a credential stays readable


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@db:6379/0", "redis://***@db:6379/0"),
        ("redis://bridge:hunter2@db:6379/0", "redis://***@db:6379/0"),
        ("redis://db/0?password=hunter2&prefix=a:", "redis://db/0?password=***&prefix=a:"),
        (
            "rediss://db/0?username=bridge&password=p%40ss",
            "rediss://db/0?username=***&password=***",
        ),
        ("sqlite:///srv/bridge.db", "sqlite:///srv/bridge.db"),
    ],
)
def test_a_store_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# --- open_store ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite", f"data/{SQLITE_FILENAME}"),
        ("SQLite", f"data/{SQLITE_FILENAME}"),
        ("sqlite://{tmp}/elsewhere/custom.db", "elsewhere/custom.db"),
    ],
)
async def test_open_store_opens_sqlite_where_the_url_says(
    tmp_path: Path, url: str, expected: str
) -> None:
    store = await open_store(url.format(tmp=tmp_path), tmp_path / "data")
    try:
        assert isinstance(store, SqliteStore)
        assert store.path == tmp_path / expected
        assert store.path.is_file()
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("query", "prefix"),
    [("", DEFAULT_PREFIX), ("?prefix=team-a:", "team-a:"), ("?prefix=", "")],
)
async def test_open_store_connects_to_redis_with_the_prefix_the_url_names(
    redis_server: RedisServer, tmp_path: Path, query: str, prefix: str
) -> None:
    store = await open_store(redis_server.url + query, tmp_path)
    try:
        assert isinstance(store, RedisStore)
        assert store.prefix == prefix
        assert not await store.seen(f"probe-{uuid.uuid4().hex}", 1)
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "unknown store"),
        ("memory", "unknown store"),
        ("redis", "unknown store"),
        ("postgres://bridge:hunter2@db/bridge", "unknown store"),
        ("sqlite://relative.db", "needs an absolute file path"),
        ("sqlite:///", "needs an absolute file path"),
        ("redis://bridge:hunter2@localhost:port/0", "bad redis store URL"),
    ],
)
async def test_open_store_rejects_a_url_it_does_not_understand(
    tmp_path: Path, url: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        await open_store(url, tmp_path)
    assert "hunter2" not in str(raised.value)
    assert not (tmp_path / SQLITE_FILENAME).exists()


# --- schedules (bridge/schedules/) -------------------------------------------------------


def schedule(schedule_id: str, key: str = KEY, at: float = T0, **changes: object) -> ScheduleRecord:
    fields: dict[str, object] = {
        "id": schedule_id,
        "key": key,
        "chat_id": "123",
        "owner": "42",
        "words": "weekdays 09:00",
        "cron": "0 9 * * mon-fri",
        "zone": "Europe/Berlin",
        "prompt": "check CI",
        "created_at": at,
        "done_until": at,
    }
    return ScheduleRecord.model_validate({**fields, **changes})


async def test_schedules_are_kept_listed_oldest_first_and_by_conversation(store: Store) -> None:
    await store.put_schedule(schedule("b", at=T0 + 1))
    await store.put_schedule(schedule("a", at=T0 + 2))
    await store.put_schedule(schedule("c", key=OTHER, at=T0))
    assert [s.id for s in await store.schedules()] == ["c", "b", "a"]
    assert [s.id for s in await store.schedules(KEY)] == ["b", "a"]
    assert await store.get_schedule("a") == schedule("a", at=T0 + 2)
    assert await store.get_schedule("zz") is None


async def test_a_schedule_is_overwritten_by_its_id_and_deleted_once(store: Store) -> None:
    await store.put_schedule(schedule("a"))
    await store.put_schedule(schedule("a", state="paused", done_until=T0 + 60))
    again = await store.get_schedule("a")
    assert again is not None
    assert (again.state, again.done_until) == ("paused", T0 + 60)
    assert len(await store.schedules()) == 1
    assert await store.delete_schedule("a") is True
    assert await store.delete_schedule("a") is False
    assert await store.schedules() == []


async def test_schedules_survive_a_restart(backend: Backend) -> None:
    await backend.store.put_schedule(schedule("a", state="active"))
    again = await backend.open_again()
    assert [s.id for s in await again.schedules()] == ["a"]


# --- what a hosted agent's run has shown (bridge/rpc/shown.py) ------------------------------


async def test_a_shown_snapshot_is_kept_replaced_and_dropped_per_conversation(
    backend: Backend,
) -> None:
    store = backend.store
    assert await store.get_shown(KEY) is None
    assert await store.put_shown(KEY, "six", host="4:5", through=6)
    assert await store.put_shown(KEY, "nine é\n9 {}", host="4:5", through=9)
    assert await store.put_shown(OTHER, "other", host="4:5", through=99)
    again = await backend.open_again()  # kept across a restart
    assert await again.get_shown(KEY) == "nine é\n9 {}"
    await again.drop_shown(KEY)
    await again.drop_shown("tg:nobody")
    assert await again.get_shown(KEY) is None
    assert await again.get_shown(OTHER) == "other"


async def test_a_deleted_conversation_leaves_no_snapshot(store: Store) -> None:
    # A conversation made anew under the same key must not take back what the old one showed.
    assert await store.put_shown(KEY, "six", host="4:5", through=6)
    assert await store.put_shown(OTHER, "other", host="4:5", through=9)
    await store.delete_conversation(KEY)
    assert await store.get_shown(KEY) is None
    assert await store.get_shown(OTHER) == "other"


async def test_a_snapshot_covering_less_of_the_same_host_does_not_replace_one(
    store: Store,
) -> None:
    # A late write of an owner fenced off since: the host forgot what the newer covers.
    assert await store.put_shown(KEY, "nine", host="4:5", through=9)
    assert not await store.put_shown(KEY, "seven", host="4:5", through=7)
    assert await store.get_shown(KEY) == "nine"
    assert await store.put_shown(KEY, "nine again", host="4:5", through=9)
    # Another host numbers its records afresh: its snapshot replaces any.
    assert await store.put_shown(KEY, "two", host="8:1", through=2)
    assert await store.get_shown(KEY) == "two"

"""The default store: one sqlite file under the data dir (stdlib sqlite3, WAL mode).

One connection, used from worker threads (`anyio.to_thread.run_sync`) one call at a time
under an `anyio.Lock`. Records are JSON text columns next to the indexed columns the
queries need. Every operation is a single statement or an IMMEDIATE transaction, so it is
also atomic against another process on the same file. The schema version lives in
`PRAGMA user_version`; `_MIGRATIONS[n]` takes a file from version n to n + 1. Dedupe
expiry follows the injected clock; expired keys are purged on open and then at most once
per `PURGE_INTERVAL` of that clock.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread

from bridge.spend.usage import UsageEntry, UsageTotals
from bridge.store.base import RAISE_RETENTION, USAGE_RETENTION, StoreError, check_ttl
from bridge.store.records import AuditEntry, ConversationRecord, DialogRecord, LiveRunRecord
from bridge.store.schedule_record import ScheduleRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from bridge.spend.usage import UsageScope

T = TypeVar("T")

PURGE_INTERVAL = 60.0  # seconds between sweeps of expired dedupe keys
BUSY_TIMEOUT_MS = 5_000  # wait this long for another process's write lock

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE conversations (
        key TEXT PRIMARY KEY,
        record TEXT NOT NULL
    );
    CREATE TABLE dialogs (
        token TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        request_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX dialogs_by_dialog ON dialogs (key, request_id);
    CREATE TABLE dedupe (
        dedupe_key TEXT PRIMARY KEY,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX dedupe_by_expiry ON dedupe (expires_at);
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        entry TEXT NOT NULL
    );
    CREATE INDEX audit_by_key ON audit (key, id);
    """,
    """
    CREATE TABLE live_runs (
        key TEXT PRIMARY KEY,
        message_id TEXT NOT NULL,
        record TEXT NOT NULL
    );
    """,
    """
    CREATE TABLE schedules (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        created_at REAL NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX schedules_by_key ON schedules (key, created_at, id);
    """,
    """
    CREATE TABLE usage (
        key TEXT NOT NULL,
        message TEXT NOT NULL,
        person TEXT NOT NULL,
        chat TEXT NOT NULL,
        at REAL NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (key, message)
    ) WITHOUT ROWID;
    CREATE INDEX usage_by_key ON usage (key, at);
    CREATE INDEX usage_by_person ON usage (person, at);
    CREATE INDEX usage_by_chat ON usage (chat, at);
    CREATE TABLE raises (
        name TEXT PRIMARY KEY,
        amount REAL NOT NULL,
        at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    """
    CREATE TABLE shown (
        key TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        through INTEGER NOT NULL,
        snapshot TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)


class SqliteStore:
    """`Store` on a sqlite file; open with `await SqliteStore.open(path)`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, clock: Callable[[], float]) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = conn
        self._clock = clock
        self._lock = anyio.Lock()
        self._next_purge = clock() + PURGE_INTERVAL

    @classmethod
    async def open(cls, path: Path, *, clock: Callable[[], float] = time.time) -> SqliteStore:
        """Open (creating file and parent dir if needed) and bring the schema up to date."""
        try:
            conn = await anyio.to_thread.run_sync(_connect, path, clock())
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the sqlite store {path}: {exc}") from exc
        return cls(path, conn, clock)

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"SqliteStore({str(self._path)!r})"

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` on the connection in a worker thread, one call at a time."""
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"{self!r} is closed")
            return await anyio.to_thread.run_sync(fn, conn)

    # --- conversations -------------------------------------------------------------

    async def get_conversation(self, key: str) -> ConversationRecord | None:
        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT record FROM conversations WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        text = await self._run(get)
        return None if text is None else ConversationRecord.model_validate_json(text)

    async def put_conversation(self, record: ConversationRecord) -> None:
        text = record.model_dump_json()

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO conversations (key, record) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET record = excluded.record",
                (record.key, text),
            )

        await self._run(put)

    async def list_conversations(self) -> list[ConversationRecord]:
        def list_all(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT record FROM conversations ORDER BY key").fetchall()
            return [str(row[0]) for row in rows]

        return [ConversationRecord.model_validate_json(text) for text in await self._run(list_all)]

    async def delete_conversation(self, key: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            with _immediate(conn):
                conn.execute("DELETE FROM conversations WHERE key = ?", (key,))
                conn.execute("DELETE FROM dialogs WHERE key = ?", (key,))
                conn.execute("DELETE FROM shown WHERE key = ?", (key,))

        await self._run(delete)

    # --- dialogs ---------------------------------------------------------------------

    async def put_dialogs(self, records: Sequence[DialogRecord]) -> None:
        # REPLACE gives an overwritten token a new rowid, i.e. it moves to the end of its
        # dialog, the same order redis keeps.
        rows = [(r.token, r.key, r.request_id, r.created_at, r.model_dump_json()) for r in records]
        if not rows:
            return

        def put(conn: sqlite3.Connection) -> None:
            with _immediate(conn):
                conn.executemany(
                    "REPLACE INTO dialogs (token, key, request_id, created_at, record)"
                    " VALUES (?, ?, ?, ?, ?)",
                    rows,
                )

        await self._run(put)

    async def get_dialog(self, token: str) -> DialogRecord | None:
        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT record FROM dialogs WHERE token = ?", (token,)).fetchone()
            return None if row is None else str(row[0])

        text = await self._run(get)
        return None if text is None else DialogRecord.model_validate_json(text)

    async def take_dialog(self, request_id: str, key: str) -> bool:
        # One DELETE is atomic even against other processes: only the caller whose
        # statement removed the rows sees a non-zero count.
        def take(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM dialogs WHERE key = ? AND request_id = ?", (key, request_id)
            )
            return cursor.rowcount > 0

        return await self._run(take)

    async def dialogs_for(self, key: str) -> list[DialogRecord]:
        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT record FROM dialogs WHERE key = ? ORDER BY created_at, request_id, rowid",
                (key,),
            ).fetchall()
            return [str(row[0]) for row in rows]

        return [DialogRecord.model_validate_json(text) for text in await self._run(select)]

    # --- dedupe ----------------------------------------------------------------------

    async def seen(self, dedupe_key: str, ttl: float) -> bool:
        check_ttl(ttl)
        now = self._clock()
        purge = now >= self._next_purge
        if purge:
            self._next_purge = now + PURGE_INTERVAL

        # The upsert only writes when the key is new or has expired, so "a row changed"
        # means "first time within ttl", decided by one atomic statement.
        def check_and_set(conn: sqlite3.Connection) -> bool:
            if purge:
                _purge_expired(conn, now)
            cursor = conn.execute(
                "INSERT INTO dedupe (dedupe_key, expires_at) VALUES (?, ?)"
                " ON CONFLICT (dedupe_key) DO UPDATE SET expires_at = excluded.expires_at"
                " WHERE dedupe.expires_at <= ?",
                (dedupe_key, now + ttl, now),
            )
            return cursor.rowcount == 0

        return await self._run(check_and_set)

    # --- audit -----------------------------------------------------------------------

    async def audit(self, entry: AuditEntry) -> None:
        text = entry.model_dump_json()

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO audit (key, entry) VALUES (?, ?)", (entry.key, text))

        await self._run(insert)

    async def audit_log(self, key: str | None = None, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []

        def select(conn: sqlite3.Connection) -> list[str]:
            if key is None:
                cursor = conn.execute("SELECT entry FROM audit ORDER BY id DESC LIMIT ?", (limit,))
            else:
                cursor = conn.execute(
                    "SELECT entry FROM audit WHERE key = ? ORDER BY id DESC LIMIT ?", (key, limit)
                )
            return [str(row[0]) for row in cursor.fetchall()]

        return [AuditEntry.model_validate_json(text) for text in await self._run(select)]

    # --- live runs -------------------------------------------------------------------

    async def put_live_run(self, record: LiveRunRecord) -> None:
        text = record.model_dump_json()

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "REPLACE INTO live_runs (key, message_id, record) VALUES (?, ?, ?)",
                (record.key, record.message_id, text),
            )

        await self._run(put)

    async def live_runs(self) -> list[LiveRunRecord]:
        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT record FROM live_runs ORDER BY key").fetchall()
            return [str(row[0]) for row in rows]

        return [LiveRunRecord.model_validate_json(text) for text in await self._run(select)]

    async def drop_live_run(self, key: str, message_id: str) -> bool:
        def drop(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM live_runs WHERE key = ? AND message_id = ?", (key, message_id)
            )
            return cursor.rowcount > 0

        return await self._run(drop)

    # --- schedules -------------------------------------------------------------------

    async def put_schedule(self, record: ScheduleRecord) -> None:
        row = (record.id, record.key, record.created_at, record.model_dump_json())

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "REPLACE INTO schedules (id, key, created_at, record) VALUES (?, ?, ?, ?)", row
            )

        await self._run(put)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT record FROM schedules WHERE id = ?", (schedule_id,)
            ).fetchone()
            return None if row is None else str(row[0])

        text = await self._run(get)
        return None if text is None else ScheduleRecord.model_validate_json(text)

    async def schedules(self, key: str | None = None) -> list[ScheduleRecord]:
        def select(conn: sqlite3.Connection) -> list[str]:
            if key is None:
                cursor = conn.execute("SELECT record FROM schedules ORDER BY created_at, id")
            else:
                cursor = conn.execute(
                    "SELECT record FROM schedules WHERE key = ? ORDER BY created_at, id", (key,)
                )
            return [str(row[0]) for row in cursor.fetchall()]

        return [ScheduleRecord.model_validate_json(text) for text in await self._run(select)]

    async def delete_schedule(self, schedule_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,))
            return cursor.rowcount > 0

        return await self._run(delete)

    async def aclose(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await anyio.to_thread.run_sync(conn.close)

    # --- usage and raised limits ----------------------------------------------------

    async def add_usage(self, entry: UsageEntry) -> bool:
        row = (entry.key, entry.message, entry.person, entry.chat, entry.at)
        text = entry.model_dump_json()
        cutoff = entry.at - USAGE_RETENTION

        def insert(conn: sqlite3.Connection) -> bool:
            # The primary key makes a second copy of one message a no-op, even when
            # another process on the same file inserts it at the same moment.
            cursor = conn.execute(
                "INSERT OR IGNORE INTO usage (key, message, person, chat, at, entry)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (*row, text),
            )
            conn.execute("DELETE FROM usage WHERE key = ? AND at < ?", (entry.key, cutoff))
            return cursor.rowcount > 0

        return await self._run(insert)

    async def usage_totals(self, scope: UsageScope, name: str, since: float) -> UsageTotals:
        column = _USAGE_COLUMNS[scope]

        def select(conn: sqlite3.Connection) -> tuple[float, ...]:
            # `column` is one of _USAGE_COLUMNS, never text from outside. Summed here,
            # over the index on (column, at): a month of entries is never read out.
            fields = ", ".join(f"TOTAL(json_extract(entry, '$.{f}'))" for f in _USAGE_FIELDS)
            return tuple(
                conn.execute(
                    f"SELECT COUNT(*), {fields} FROM usage WHERE {column} = ? AND at >= ?",
                    (name, since),
                ).fetchone()
            )

        count, *sums = await self._run(select)
        totals = dict(zip(_USAGE_FIELDS, sums, strict=True))
        return UsageTotals(
            messages=int(count),
            **{f: int(v) for f, v in totals.items() if f != "cost"},
            cost=float(totals["cost"]),
        )

    async def raise_limit(self, name: str, amount: float) -> float:
        now = self._clock()

        def add(conn: sqlite3.Connection) -> float:
            with _immediate(conn):
                conn.execute("DELETE FROM raises WHERE at < ?", (now - RAISE_RETENTION,))
                row = conn.execute(
                    "INSERT INTO raises (name, amount, at) VALUES (?, ?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET amount = amount + excluded.amount"
                    " RETURNING amount",
                    (name, amount, now),
                ).fetchone()
            return float(row[0])

        return await self._run(add)

    async def raised(self, name: str) -> float:
        def get(conn: sqlite3.Connection) -> float:
            row = conn.execute("SELECT amount FROM raises WHERE name = ?", (name,)).fetchone()
            return 0.0 if row is None else float(row[0])

        return await self._run(get)

    # --- what a hosted agent's run has shown ----------------------------------------------

    async def put_shown(self, key: str, snapshot: str, *, host: str, through: int) -> bool:
        def put(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "INSERT INTO shown (key, host, through, snapshot) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET host = excluded.host,"
                " through = excluded.through, snapshot = excluded.snapshot"
                " WHERE NOT (shown.host = excluded.host AND shown.through > excluded.through)",
                (key, host, through, snapshot),
            )
            return cursor.rowcount > 0

        return await self._run(put)

    async def get_shown(self, key: str) -> str | None:
        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT snapshot FROM shown WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(get)

    async def drop_shown(self, key: str) -> None:
        def drop(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM shown WHERE key = ?", (key,))

        await self._run(drop)


_USAGE_COLUMNS = {"conversation": "key", "person": "person", "chat": "chat"}
_USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "cost")


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One IMMEDIATE transaction: it takes the write lock up front, so a concurrent writer
    waits (busy_timeout) instead of failing halfway; rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _connect(path: Path, now: float) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Autocommit mode (isolation_level=None): single statements commit on their own and
    # multi-statement writes use explicit IMMEDIATE transactions.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable across app crashes in WAL mode
        _migrate(conn, path)
        _purge_expired(conn, now)
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    with _immediate(conn):
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has store schema version {version}, newer than this bridge's "
                f"{SCHEMA_VERSION}: upgrade the bridge or use another data dir"
            )
        for number in range(version, SCHEMA_VERSION):
            for statement in _statements(_MIGRATIONS[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT the surrounding transaction; run statements one by one
    # so a failed migration rolls back completely.
    return [part.strip() for part in script.split(";") if part.strip()]


def _purge_expired(conn: sqlite3.Connection, now: float) -> None:
    conn.execute("DELETE FROM dedupe WHERE expires_at <= ?", (now,))


__all__ = ["PURGE_INTERVAL", "SCHEMA_VERSION", "SqliteStore"]

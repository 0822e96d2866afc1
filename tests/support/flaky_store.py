"""The real sqlite store, failing for real for a while: a locked database.

Admission tests need the store to fail the way a backend does (a real
`sqlite3.OperationalError` out of the real store's method), not a mock: the first
`failures` dedupe checks of a delivery id fail, and the first `lookup_failures`
conversation lookups (opening a conversation reads its record).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from bridge.store import SQLITE_FILENAME, SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.store import ConversationRecord

LOCKED = "database is locked"


class FlakyStore(SqliteStore):
    failures = 0
    lookup_failures = 0

    async def seen(self, dedupe_key: str, ttl: float) -> bool:
        if dedupe_key.startswith("in:") and self.failures > 0:
            self.failures -= 1
            raise sqlite3.OperationalError(LOCKED)
        return await super().seen(dedupe_key, ttl)

    async def get_conversation(self, key: str) -> ConversationRecord | None:
        if self.lookup_failures > 0:
            self.lookup_failures -= 1
            raise sqlite3.OperationalError(LOCKED)
        return await super().get_conversation(key)


async def open_flaky(data_dir: Path, failures: int = 0, lookup_failures: int = 0) -> FlakyStore:
    """The store `open_store("sqlite", data_dir)` opens, failing as asked."""
    store = await FlakyStore.open(data_dir / SQLITE_FILENAME)
    assert isinstance(store, FlakyStore)
    store.failures, store.lookup_failures = failures, lookup_failures
    return store

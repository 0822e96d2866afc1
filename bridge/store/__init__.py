"""Persistent bridge state behind one `Store` protocol: sqlite (default) or redis.

`open_store` picks the backend from the `PI_BRIDGE_STORE` value: "sqlite" (the file
`bridge.sqlite3` in the data dir), "sqlite:///absolute/path.db", or a "redis://" /
"rediss://" URL (optional `?prefix=` for the key prefix). Store URLs may carry a
password, so error messages only ever show them redacted.

The backends are imported when a store is opened (or one is asked for by name), not
with the package: Python runs this file before any module of the package, and the
records are read by pure modules (the approvals' grants) that must not load sqlite3,
redis and anyio with them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.store.base import AUDIT_CAP, Store, StoreError, redact_url
from bridge.store.records import AuditEntry, ConversationRecord, DialogRecord, LiveRunRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.store.redis import RedisStore
    from bridge.store.sqlite import SqliteStore

SQLITE_FILENAME = "bridge.sqlite3"
_USAGE = '"sqlite", "sqlite:///absolute/path.db", or a redis:// or rediss:// URL'


async def open_store(url: str, data_dir: Path, *, clock: Callable[[], float] = time.time) -> Store:
    """Open the store `url` names; `data_dir` is only used by plain "sqlite".

    Raises ValueError for a URL of no known form, `StoreError` when it cannot be opened.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if url.lower() == "sqlite" or (sep and scheme == "sqlite"):
        from bridge.store.sqlite import SqliteStore

        path = data_dir / SQLITE_FILENAME if not sep else _sqlite_path(rest, url)
        return await SqliteStore.open(path, clock=clock)
    if sep and scheme in ("redis", "rediss"):
        from bridge.store.redis import RedisStore

        return await RedisStore.open(url)
    raise ValueError(f"unknown store {redact_url(url)!r}: expected {_USAGE}")


def _sqlite_path(rest: str, url: str) -> Path:
    # "sqlite:///abs/path.db": what follows "sqlite://" is the path itself. Relative paths
    # are refused, since relative to what (cwd? data dir?) would be a guess.
    path = Path(rest)
    if not path.is_absolute() or path == Path(path.anchor):
        raise ValueError(f"sqlite store URL {url!r} needs an absolute file path: {_USAGE}")
    return path


def __getattr__(name: str) -> type[SqliteStore] | type[RedisStore]:
    """`SqliteStore` and `RedisStore`, imported on first use (see above)."""
    if name == "SqliteStore":
        from bridge.store.sqlite import SqliteStore

        return SqliteStore
    if name == "RedisStore":
        from bridge.store.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AUDIT_CAP",
    "SQLITE_FILENAME",
    "AuditEntry",
    "ConversationRecord",
    "DialogRecord",
    "LiveRunRecord",
    "RedisStore",
    "SqliteStore",
    "Store",
    "StoreError",
    "open_store",
]

"""The `Store` contract every backend fulfils, and the ordering rules it promises.

Invariants shared by the sqlite and redis backends (tests/store/test_store.py runs one suite
against both):

- `put_*` overwrite: a conversation by its key, a dialog button by its token.
- `list_conversations` is sorted by key; `dialogs_for` by (created_at, request_id), buttons
  of one dialog in the order they were put.
- `take_dialog` is the one place where racing button presses are settled: it removes every
  token of the dialog at once and exactly one caller, over all replicas, gets True.
- `seen` is an atomic check-and-set with a time to live.
- `audit_log` is newest first (most recently recorded); redis keeps the last `AUDIT_CAP`
  entries per conversation and overall, sqlite keeps them all.
- `delete_conversation` also drops its dialogs; audit entries, dedupe keys and live runs
  stay (a live run names a chat message, which outlives the conversation's record).
- `put_schedule` overwrites by id; `schedules` is sorted by (created_at, id). Firing an
  occurrence once over all workers is `seen`'s: its key names the occurrence.
- `add_usage` keeps an entry once per (conversation, message): True only the first time,
  whichever replica asks. `usage_totals` sums the entries of one conversation, person
  or chat from `since` on; entries older than `USAGE_RETENTION` may be forgotten.
  `raise_limit` adds to a named allowance (a limit raised for one day) atomically.
- `put_live_run` overwrites by conversation key; `live_runs` is sorted by key;
  `drop_live_run` removes a record only while it still names that message, so retiring
  an earlier run never drops the record of the run that replaced it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.spend.usage import UsageEntry, UsageScope, UsageTotals
    from bridge.store.records import (
        AuditEntry,
        ConversationRecord,
        DialogRecord,
        LiveRunRecord,
    )
    from bridge.store.schedule_record import ScheduleRecord

AUDIT_CAP = 10_000
# Usage is summed for this month at most; kept a little longer for a month's start in
# any time zone. An allowance is one day's, kept two.
USAGE_RETENTION = 40 * 24 * 3600.0
RAISE_RETENTION = 2 * 24 * 3600.0


class StoreError(Exception):
    """The store cannot be opened or used (unreachable, closed, newer schema)."""


class Store(Protocol):
    async def get_conversation(self, key: str) -> ConversationRecord | None: ...

    async def put_conversation(self, record: ConversationRecord) -> None: ...

    async def list_conversations(self) -> list[ConversationRecord]: ...

    async def delete_conversation(self, key: str) -> None:
        """Remove the conversation, all its pending dialogs and what its run showed."""
        ...

    async def put_dialogs(self, records: Sequence[DialogRecord]) -> None:
        """Store the tokens of a dialog (usually all its buttons) in one go."""
        ...

    async def get_dialog(self, token: str) -> DialogRecord | None: ...

    async def take_dialog(self, request_id: str, key: str) -> bool:
        """Remove all tokens of the dialog; True only for the one caller that removed them."""
        ...

    async def dialogs_for(self, key: str) -> list[DialogRecord]: ...

    async def seen(self, dedupe_key: str, ttl: float) -> bool:
        """False the first time (remembered for `ttl` seconds), True on calls within `ttl`."""
        ...

    async def audit(self, entry: AuditEntry) -> None: ...

    async def audit_log(self, key: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The latest `limit` entries, of one conversation or all, newest first."""
        ...

    async def put_live_run(self, record: LiveRunRecord) -> None:
        """Remember the conversation's live run (replacing an earlier one)."""
        ...

    async def live_runs(self) -> list[LiveRunRecord]: ...

    async def drop_live_run(self, key: str, message_id: str) -> bool:
        """Forget the conversation's live run if it is the one of `message_id`; True if so."""
        ...

    async def aclose(self) -> None: ...

    # --- schedules (bridge/schedules/) ---------------------------------------------------

    async def put_schedule(self, record: ScheduleRecord) -> None:
        """Store a schedule (overwriting one of its id)."""
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None: ...

    async def schedules(self, key: str | None = None) -> list[ScheduleRecord]:
        """Every schedule, or one conversation's, oldest first (created_at, then id)."""
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Forget a schedule; True if it was there."""

    async def add_usage(self, entry: UsageEntry) -> bool:
        """Keep one message's usage; False (and nothing changed) if it is kept already."""
        ...

    async def usage_totals(self, scope: UsageScope, name: str, since: float) -> UsageTotals:
        """The sums of the usage of one conversation, person or chat since `since`."""
        ...

    async def raise_limit(self, name: str, amount: float) -> float:
        """Add `amount` to the allowance `name`; the new total."""
        ...

    async def raised(self, name: str) -> float:
        """The allowance `name` (0 if none was raised)."""
        ...

    # --- what a hosted agent's run has shown (bridge/rpc/shown.py) --------------------

    async def put_shown(self, key: str, snapshot: str, *, host: str, through: int) -> bool:
        """Keep the snapshot of what conversation `key`'s running agent (under `host`)
        has shown up to its record `through`, replacing the one before, unless that one
        is of the same host and covers more (a late write of an owner fenced off since):
        then False, and nothing changed."""
        ...

    async def get_shown(self, key: str) -> str | None: ...

    async def drop_shown(self, key: str) -> None: ...


def check_ttl(ttl: float) -> None:
    """A dedupe key that is never remembered would silently let every redelivery through."""
    if not ttl > 0:
        raise ValueError(f"ttl must be positive seconds, got {ttl!r}")


def redact_url(url: str) -> str:
    """The URL without credentials: store URLs are secrets, error messages are not.

    Any userinfo becomes "***" (some write the password where the user goes) and so do
    query values whose names look like credentials (redis-py accepts `?password=`).
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = urlencode(
        [
            (name, "***" if _looks_secret(name) else value)
            for name, value in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*:/",
    )
    if "://" in url:
        # Built by hand: `urlunsplit` drops the empty host of `sqlite:///abs/path.db`.
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _looks_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("pass", "secret", "token", "auth", "user", "cred"))


def dialog_order(record: DialogRecord) -> tuple[float, str]:
    """Sort key of `dialogs_for` (stable sort keeps a dialog's buttons in put order)."""
    return (record.created_at, record.request_id)


__all__ = [
    "AUDIT_CAP",
    "RAISE_RETENTION",
    "USAGE_RETENTION",
    "Store",
    "StoreError",
    "check_ttl",
    "dialog_order",
    "redact_url",
]

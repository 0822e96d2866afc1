"""The store's record of each conversation's live status message.

A run's status message carries [⏹ Stop] until the run ends; a process killed
without a drain leaves it so for good. `LiveRuns` therefore keeps a record in the
store of each conversation's live status message, from the ops the outbox carries
out, and on start edits the ones an earlier process left live to say it stopped
(once: each record is dropped as its edit is queued) and marks the user's messages
that the run was working on (its prompt, and any steered into it) failed. The
agent's session is on disk, so the conversation itself resumes on its next message
as after any restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.model import ChatRef, MessageRef, React
from bridge.render.status import retire_after_crash, run_is_live
from bridge.store.records import LiveRunRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from bridge.model import Op
    from bridge.outbox import Outbox
    from bridge.store.base import Store


class LiveRuns:
    """The store's record of live status messages (see the module docstring)."""

    def __init__(self, store: Store, wall: Callable[[], float]) -> None:
        self._store = store
        self._wall = wall
        self._recorded: dict[str, LiveRunRecord] = {}  # conversation key → its live run
        self._working: dict[str, list[str]] = {}  # conversation key → its messages marked 👀

    async def delivered(self, key: str, chat: ChatRef, op: Op, ref: MessageRef | None) -> None:
        """An outbox observer: only a run's start and end (and its prompt's reactions)
        touch the store, not its progress edits."""
        if isinstance(op, React):
            await self._reacted(key, op)
            return
        live = run_is_live(op)
        recorded = self._recorded.get(key)
        if live and ref is not None and (recorded is None or ref.message_id != recorded.message_id):
            record = _record(key, chat, ref.message_id, self._wall(), self._working.get(key, []))
            self._recorded[key] = record
            await self._store.put_live_run(record)
        elif live is False and recorded is not None:
            del self._recorded[key]
            await self._store.drop_live_run(key, recorded.message_id)

    async def _reacted(self, key: str, react: React) -> None:
        # Reactions have a lane of their own: 👀 may land before or after the status.
        working = self._working.setdefault(key, [])
        if react.state == "working":
            working.append(react.message_id)
        elif react.message_id in working:
            working.remove(react.message_id)
        if not working:
            del self._working[key]
        recorded = self._recorded.get(key)
        if recorded is not None and recorded.working_on != working:
            record = recorded.model_copy(update={"working_on": list(working)})
            self._recorded[key] = record
            await self._store.put_live_run(record)

    async def retire(
        self, outbox: Outbox, key_prefix: str = "", skip: Collection[str] = (), only: str = ""
    ) -> int:
        """Queue the edit of every status an earlier process left live in conversations
        under `key_prefix` (another platform's are not this outbox's to edit), but
        those in `skip` (their agents run on), or only `only`'s; how many there were."""
        records = [
            r
            for r in await self._store.live_runs()
            if r.key.startswith(key_prefix) and r.key not in skip and (r.key == only or not only)
        ]
        for record in records:
            chat = ChatRef(record.chat_id, record.thread_id, record.is_group)
            slot, edit = retire_after_crash(record.message_id)
            outbox.adopt(record.key, slot, MessageRef(chat, record.message_id))
            outbox.submit(record.key, chat, [edit])
            outbox.submit(record.key, chat, [React(m, "failed") for m in record.working_on])
            await self._store.drop_live_run(record.key, record.message_id)
        return len(records)


def _record(
    key: str, chat: ChatRef, message_id: str, now: float, working_on: list[str]
) -> LiveRunRecord:
    return LiveRunRecord(
        key=key,
        chat_id=chat.chat_id,
        thread_id=chat.thread_id,
        is_group=chat.is_group,
        message_id=message_id,
        started_at=now,
        working_on=list(working_on),
    )

"""The records a host keeps until a bridge acknowledges them (see the package's docstring)."""

from __future__ import annotations

import collections
import contextlib
import os
import re
from dataclasses import dataclass
from typing import BinaryIO

MEMORY_CAP = 8 << 20  # bytes of records kept in memory before spilling to the file
SPILL_CAP = 256 << 20  # bytes kept in all before updates are dropped
# The droppable kinds, the first dropped first; any other record is kept.
DROPPABLE = {b"message_update": 1, b"tool_execution_update": 2}
_TYPE = re.compile(rb'^\{\s*"type"\s*:\s*"([a-z_]+)"')


def kind(record: bytes) -> bytes:
    found = _TYPE.match(record, 0, 80)  # no copy of the record's start
    return found.group(1) if found else b""


@dataclass(slots=True)
class Entry:
    seq: int
    rank: int  # 0: never dropped; else the order in which kinds are dropped
    data: bytes | None  # None: in the spill file
    offset: int
    length: int


class Buffer:
    """The records not yet acknowledged, oldest first: in memory up to `memory_cap`,
    older ones in a spill file, and past `total_cap` the oldest droppable ones gone."""

    def __init__(self, spill_path: str, memory_cap: int, total_cap: int) -> None:
        self.entries: collections.deque[Entry] = collections.deque()
        self.memory = 0  # bytes held in memory
        self.total = 0  # bytes kept, in memory or spilled
        self.dropped = 0
        self._path = spill_path
        self._file: BinaryIO | None = None
        self._end = 0
        self._memory_cap = memory_cap
        self._total_cap = total_cap

    def add(self, seq: int, record: bytes, kind_of: bytes | None = None) -> None:
        """Keep `record` (its `kind`, when the caller has it already)."""
        rank = DROPPABLE.get(kind(record) if kind_of is None else kind_of, 0)
        self.entries.append(Entry(seq, rank, record, 0, len(record)))
        self.memory += len(record)
        self.total += len(record)
        if self.memory > self._memory_cap:
            self._spill()
        if self.total > self._total_cap:
            self._drop()

    def oldest(self) -> int:
        return self.entries[0].seq if self.entries else 0

    def ack(self, seq: int) -> None:
        while self.entries and self.entries[0].seq <= seq:
            self._forget(self.entries.popleft())
        if self._end and all(entry.data is not None for entry in self.entries):
            assert self._file is not None
            self._file.truncate(0)  # nothing spilled is kept: the file starts over
            self._end = 0

    def after(self, seq: int) -> list[tuple[int, bytes]]:
        """The kept records after `seq`, in order (the spilled ones read back)."""
        return [(entry.seq, self._data(entry)) for entry in self.entries if entry.seq > seq]

    def _data(self, entry: Entry) -> bytes:
        if entry.data is not None:
            return entry.data
        assert self._file is not None
        return os.pread(self._file.fileno(), entry.length, entry.offset)

    def _spill(self) -> None:
        if self._file is None:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            self._file = os.fdopen(fd, "w+b")
        for entry in self.entries:
            if self.memory <= self._memory_cap // 2:
                break
            if entry.data is None:
                continue
            os.pwrite(self._file.fileno(), entry.data, self._end)
            entry.offset, entry.data = self._end, None
            self._end += entry.length
            self.memory -= entry.length

    def _drop(self) -> None:
        for rank in sorted(set(DROPPABLE.values())):
            kept: collections.deque[Entry] = collections.deque()
            for entry in self.entries:
                if self.total > self._total_cap and entry.rank == rank:
                    self._forget(entry)
                    self.dropped += 1
                else:
                    kept.append(entry)
            self.entries = kept
            if self.total <= self._total_cap:
                break
        self.compact()

    def _forget(self, entry: Entry) -> None:
        self.total -= entry.length
        if entry.data is not None:
            self.memory -= entry.length

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            with contextlib.suppress(OSError):
                os.unlink(self._path)

    def compact(self) -> None:
        """Rewrite the spill file with only what is kept: dropped records leave holes."""
        if self._file is None or self._end <= 2 * max(self.total, self._memory_cap):
            return
        fresh_path = self._path + ".new"
        fd = os.open(fresh_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        end = 0
        for entry in self.entries:
            if entry.data is None:
                os.pwrite(fd, self._data(entry), end)
                entry.offset = end
                end += entry.length
        os.replace(fresh_path, self._path)
        self._file.close()
        self._file, self._end = os.fdopen(fd, "w+b"), end

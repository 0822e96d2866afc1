"""LF-only record framing for the agent's stdout, with no I/O.

Invariants (docs/rpc.md, "Framing on LF only"):
- records end at b"\\n" only; U+2028/U+2029 and every other byte inside a record
  are content, so nothing here decodes text or uses `splitlines()`;
- one trailing b"\\r" is stripped (CRLF writers are tolerated), empty records are
  skipped;
- there is no per-line limit of the asyncio kind, but a hard cap: a record longer
  than `max_record` bytes is dropped as it streams (memory stays bounded) and
  reported as an `OversizedRecord`, after which framing goes on normally.

Each byte is scanned once. A record that lies inside one chunk is sliced
straight out of it (its one copy); only the unfinished tail of a chunk is kept,
and a record that spans chunks is joined from that buffer and the chunk that
holds its LF in one more copy. Blank and oversized records are recognised from
offsets, without copying them. So a record that arrives in many chunks costs
O(size), not O(size x chunks), and one giant chunk costs one pass and one copy.
"""

from __future__ import annotations

from dataclasses import dataclass

# 0.73.1 sends the whole partial message twice per delta: a 2000-delta answer's
# last line is ~25 KB and a whole agent_end can reach several MB. 64 MiB leaves
# room for huge tool outputs while bounding what one bad record can cost.
DEFAULT_MAX_RECORD = 64 * 1024 * 1024

_LF = b"\n"
_CR = 0x0D


@dataclass(frozen=True, slots=True)
class OversizedRecord:
    """A record that exceeded the cap and was skipped; `size` counts its bytes."""

    size: int
    limit: int


Frame = bytes | OversizedRecord


class LineSplitter:
    """Turns a byte stream into records: `feed(chunk)` returns the complete ones."""

    def __init__(self, max_record: int = DEFAULT_MAX_RECORD) -> None:
        if max_record < 1:
            raise ValueError("max_record must be positive")
        self._max = max_record
        self._buf = bytearray()  # start of the record whose LF has not come; holds no LF
        self._skipping = 0  # >0: inside an oversized record, counting its bytes

    def feed(self, chunk: bytes) -> list[Frame]:
        out: list[Frame] = []
        if not isinstance(chunk, bytes):
            chunk = bytes(chunk)  # records come out as `bytes` whatever went in
        if self._skipping:
            nl = chunk.find(_LF)
            if nl < 0:
                self._skipping += len(chunk)
                return out
            out.append(OversizedRecord(self._skipping + nl, self._max))
            self._skipping = 0
            self._split(chunk, nl + 1, out)
        elif self._buf:
            nl = chunk.find(_LF)
            if nl < 0:
                self._hold(chunk)
                return out
            self._join(chunk, nl, out)
            self._split(chunk, nl + 1, out)
        else:
            self._split(chunk, 0, out)
        return out

    def close(self) -> list[Frame]:
        """End of stream: a last record without its LF still counts."""
        out: list[Frame] = []
        if self._skipping:
            out.append(OversizedRecord(self._skipping, self._max))
            self._skipping = 0
        elif self._buf:
            record = bytes(self._buf)
            if record.endswith(b"\r"):
                record = record[:-1]
            if len(record) > self._max:
                out.append(OversizedRecord(len(record), self._max))
            elif record and not record.isspace():
                out.append(record)
        self._buf = bytearray()
        return out

    def _split(self, chunk: bytes, pos: int, out: list[Frame]) -> None:
        """The records of `chunk` from `pos` on, with the buffer empty; keeps the tail."""
        limit = self._max
        find = chunk.find
        while (nl := find(_LF, pos)) >= 0:
            end = nl - 1 if nl > pos and chunk[nl - 1] == _CR else nl
            size = end - pos
            if size > limit:
                out.append(OversizedRecord(size, limit))
            elif size:
                record = chunk[pos:end]  # the one copy (none if it is the whole chunk)
                if not record.isspace():  # same set as bytes.strip(): blank lines go
                    out.append(record)
            pos = nl + 1
        rest = len(chunk) - pos
        if rest > limit + 1:  # +1: the record's CR may be its last buffered byte
            self._skipping = rest
        elif rest:
            self._buf += memoryview(chunk)[pos:]

    def _hold(self, chunk: bytes) -> None:
        """More of the buffered record, still without its LF."""
        total = len(self._buf) + len(chunk)
        if total > self._max + 1:  # +1: room for a CR whose LF has not come
            self._skipping = total
            self._buf.clear()
        else:
            self._buf += chunk

    def _join(self, chunk: bytes, nl: int, out: list[Frame]) -> None:
        """The buffered record ends at `chunk[nl]`: emit it, joined in one copy."""
        buf = self._buf
        if nl:
            end = nl - 1 if chunk[nl - 1] == _CR else nl
        else:
            end = 0
            if buf[-1] == _CR:
                del buf[-1]
        size = len(buf) + end
        if size > self._max:
            out.append(OversizedRecord(size, self._max))
        elif size:
            record = b"".join((buf, memoryview(chunk)[:end]))
            if not record.isspace():
                out.append(record)
        buf.clear()

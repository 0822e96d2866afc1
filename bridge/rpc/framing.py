"""LF-only record framing for the agent's stdout, with no I/O.

Invariants (OBSERVED.md, "Framing"):
- records end at b"\\n" only; U+2028/U+2029 and every other byte inside a record
  are content, so nothing here decodes text or uses `splitlines()`;
- one trailing b"\\r" is stripped (CRLF writers are tolerated), empty records are
  skipped;
- there is no per-line limit of the asyncio kind, but a hard cap: a record longer
  than `max_record` bytes is dropped as it streams (memory stays bounded) and
  reported as an `OversizedRecord`, after which framing goes on normally.

Scanning resumes where the last search stopped, so a record that arrives in
many chunks costs O(size), not O(size x chunks).
"""

from __future__ import annotations

from dataclasses import dataclass

# 0.73.1 sends the whole partial message twice per delta: a 2000-delta answer's
# last line is ~25 KB and a whole agent_end can reach several MB. 64 MiB leaves
# room for huge tool outputs while bounding what one bad record can cost.
DEFAULT_MAX_RECORD = 64 * 1024 * 1024


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
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no LF
        self._skipping = 0  # >0: inside an oversized record, counting its bytes

    def feed(self, chunk: bytes) -> list[Frame]:
        out: list[Frame] = []
        if self._skipping:
            chunk = self._skip(chunk, out)
        self._buf += chunk
        start = 0
        while True:
            nl = self._buf.find(b"\n", max(start, self._scanned))
            if nl < 0:
                break
            self._emit(self._buf[start:nl], out)
            start = nl + 1
            self._scanned = start
        if start:
            del self._buf[:start]
        self._scanned = len(self._buf)
        if len(self._buf) > self._max:
            self._skipping = len(self._buf)
            self._buf.clear()
            self._scanned = 0
        return out

    def close(self) -> list[Frame]:
        """End of stream: a last record without its LF still counts."""
        out: list[Frame] = []
        if self._skipping:
            out.append(OversizedRecord(self._skipping, self._max))
            self._skipping = 0
        elif self._buf:
            self._emit(self._buf, out)
        self._buf = bytearray()
        self._scanned = 0
        return out

    def _skip(self, chunk: bytes, out: list[Frame]) -> bytes:
        nl = chunk.find(b"\n")
        if nl < 0:
            self._skipping += len(chunk)
            return b""
        out.append(OversizedRecord(self._skipping + nl, self._max))
        self._skipping = 0
        return chunk[nl + 1 :]

    def _emit(self, record: bytes | bytearray, out: list[Frame]) -> None:
        if record.endswith(b"\r"):
            record = record[:-1]
        if len(record) > self._max:
            out.append(OversizedRecord(len(record), self._max))
        elif record.strip():
            out.append(bytes(record))

"""The agent's stdout as records: split on LF only, as the bridge's own reader does
(`bridge/rpc/framing.py`), with one trailing CR and blank lines dropped."""

from __future__ import annotations

MAX_RECORD = 64 << 20  # as the bridge's own reader (framing.DEFAULT_MAX_RECORD)
# What stands in for a record over the cap: the bridge reports it as an unknown event.
DROPPED = b'{"type":"host_dropped","reason":"record over the size limit"}'


class Lines:
    def __init__(self, max_record: int = MAX_RECORD) -> None:
        self._partial = bytearray()  # the start of a record whose LF has not come
        self._oversize = False  # inside a record over the cap: skipped to its LF
        self._max = max_record

    def feed(self, chunk: bytes) -> list[bytes]:
        found: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._oversize:
                self._oversize = False
            elif self._partial:
                self._partial += chunk[start:end]
                found.append(bytes(self._partial))
            else:
                found.append(chunk[start:end])  # the common case: one copy, no join
            self._partial.clear()
            start = end + 1
        if not self._oversize:
            self._partial += chunk[start:]
            if len(self._partial) > self._max:
                self._partial.clear()
                self._oversize = True
                found.append(DROPPED)
        return [r[:-1] if r.endswith(b"\r") else r for r in found if r not in (b"", b"\r")]

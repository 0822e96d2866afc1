"""What a hosted agent's runs have shown so far, as its records folded small.

A bridge that takes a running agent back (a restart with agent hosts, or a worker taking
a conversation over) replays every record after the last one whose run counts as shown
(`HostRecord.applied`), through a renderer set back to that point. A run streams
thousands of records; what its chat shows depends on far fewer. `Shown` keeps the
records after `applied` folded so that replaying them leaves the renderer, and the
client's run state, exactly where the whole records would:

- the `text_delta`s of one text block in a row are one delta (their text joined);
- the whole-message `message_update`s of 0.73.1 in a row are the last one;
- updates the renderer does not show (thinking, tool-call arguments, a text block's
  start) are dropped inside a message, whose `message_start` is kept;
- a tool's `tool_execution_update`s (their `partialResult` is cumulative) are its last
  one, and none once the tool has ended (its end carries the result).

Any other record is kept as it came, and so is one that does not parse. (A record the
client refuses, e.g. one that breaks the schema, may still be folded: only the agent's
own chat can show the difference, after a take-back.) Each entry
keeps the sequence number of the last record folded into it, so entries up to a new
`applied` can be forgotten. `encode`/`decode` give the text a store keeps
(`Snapshot`): the host it is of, the last record it covers, then the entries. Pure:
no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_TYPE = re.compile(rb'^\{\s*"type"\s*:\s*"([a-z_]+)"')
_SHOWN_STEPS = frozenset({"text_delta", "text_end"})
# The common case, a text delta as 0.87.1 and 1.x write it (the step last, nothing after
# it): its block and delta are read without parsing the whole record. Anything else,
# or a `"message"` before it, is parsed. (A bare `"` never occurs inside a JSON string,
# so the last `,"delta":"` is the key's.)
_STEP = b'"assistantMessageEvent":{"type":"text_delta","contentIndex":'
_DELTA_KEY = b',"delta":'
_ESCAPED = re.compile(rb'[\x00-\x1f"\\]')  # what a JSON string holds only escaped


def quick_delta(record: bytes) -> tuple[int, str] | None:
    """(contentIndex, delta) of a text delta in the common shape; None otherwise."""
    if not record.endswith(b'"}}'):
        return None
    key = record.rfind(_DELTA_KEY)
    step = record.rfind(_STEP, 0, key)
    if key < 0 or step < 0 or b'"message"' in record[:step]:
        return None
    index = record[step + len(_STEP) : key]
    if not index.isdigit():
        return None
    literal = record[key + len(_DELTA_KEY) : -2]
    try:
        if literal.startswith(b'"') and not _ESCAPED.search(literal, 1, len(literal) - 1):
            return int(index), literal[1:-1].decode()  # nothing escaped: as it is
        delta = json.loads(literal)
    except ValueError:  # UnicodeDecodeError included
        return None
    return (int(index), delta) if isinstance(delta, str) else None


def kind(record: bytes) -> bytes:
    found = _TYPE.match(record, 0, 80)
    return found.group(1) if found else b""


@dataclass(slots=True)
class Entry:
    seq: int
    data: bytes | None  # None: to be written from `value` and `parts`
    value: dict[str, Any] | None = None  # a merged text delta, parsed
    parts: list[str] = field(default_factory=list)  # its deltas, joined when written
    key: tuple[str, Any] | None = None  # what a later record may fold into
    dead: bool = False

    def bytes(self) -> bytes:
        if self.data is None:
            assert self.value is not None
            step = self.value["assistantMessageEvent"]
            step["delta"] = "".join(self.parts)
            self.parts = [step["delta"]]
            self.data = json.dumps(self.value, ensure_ascii=False, separators=(",", ":")).encode()
        return self.data


class Shown:
    """The records after some `applied`, folded (see the module's docstring)."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._tools: dict[str, Entry] = {}  # toolCallId → its kept update
        self._in_message = False

    def add(self, seq: int, record: bytes) -> None:
        what = kind(record)
        if what == b"message_update":
            self._message_update(seq, record)
            return
        if what == b"tool_execution_update":
            self._tool_update(seq, record)
            return
        if what == b"message_start":
            self._in_message = True
        elif what == b"message_end":
            self._in_message = False
        elif what == b"tool_execution_end":
            self._tool_ended(record)
        self.entries.append(Entry(seq, record))

    def forget(self, through: int) -> None:
        """Drop the entries up to `through` (its run counts as shown)."""
        self.entries = [e for e in self.entries if e.seq > through and not e.dead]
        self._tools = {k: e for k, e in self._tools.items() if e.seq > through}

    def records(self, after: int = 0) -> list[tuple[int, bytes]]:
        return [(e.seq, e.bytes()) for e in self.entries if e.seq > after and not e.dead]

    def _last(self) -> Entry | None:
        return self.entries[-1] if self.entries else None

    def _message_update(self, seq: int, record: bytes) -> None:
        last = self._last()
        if last is not None and last.key is not None and last.key[0] == "delta":
            found = quick_delta(record)
            if found is not None and last.key == ("delta", found[0]):
                last.seq, last.data = seq, None
                last.parts.append(found[1])
                return
        value = _parse(record)
        step = value.get("assistantMessageEvent") if value is not None else None
        if value is None or not isinstance(step, dict):
            self.entries.append(Entry(seq, record))
            return
        if value.get("message") is not None:  # 0.73.1: the whole message so far
            if last is not None and last.key == ("whole", None):
                last.seq, last.data = seq, record
            else:
                self.entries.append(Entry(seq, record, key=("whole", None)))
            return
        index = step.get("contentIndex")
        if step.get("type") == "text_delta" and isinstance(step.get("delta"), str):
            if last is not None and last.key == ("delta", index):
                last.seq, last.data = seq, None
                last.parts.append(step["delta"])
                return
            step.pop("partial", None)
            self.entries.append(
                Entry(seq, record, value=value, parts=[step["delta"]], key=("delta", index))
            )
            return
        if self._in_message and step.get("type") not in _SHOWN_STEPS:
            return  # the renderer shows nothing of it, and its message is open
        self.entries.append(Entry(seq, record))

    def _tool_update(self, seq: int, record: bytes) -> None:
        value = _parse(record)
        call = value.get("toolCallId") if value is not None else None
        if not isinstance(call, str):
            self.entries.append(Entry(seq, record))
            return
        kept = self._tools.get(call)
        if kept is not None and not kept.dead:
            kept.seq, kept.data = seq, record  # cumulative: the last one says it all
            return
        entry = Entry(seq, record, key=("tool", call))
        self._tools[call] = entry
        self.entries.append(entry)

    def _tool_ended(self, record: bytes) -> None:
        value = _parse(record)
        call = value.get("toolCallId") if value is not None else None
        kept = self._tools.pop(call, None) if isinstance(call, str) else None
        if kept is not None:
            kept.dead = True  # its end shows the result: its updates add nothing


def _parse(record: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(record)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Snapshot:
    """What a store keeps of `Shown`: the host (pid and its start time) it is of, the
    last record it covers (`through`), and its entries."""

    pid: int
    started: int
    through: int
    records: list[tuple[int, bytes]]

    def encode(self) -> str:
        lines = [f"shown 1 {self.pid} {self.started} {self.through}"]
        lines += [f"{seq} {data.decode('utf-8', 'replace')}" for seq, data in self.records]
        return "\n".join(lines)

    @classmethod
    def decode(cls, text: str) -> Snapshot | None:
        """None for text that is not a snapshot of this version (it is then ignored)."""
        head, *rest = text.split("\n")
        words = head.split()
        if (
            len(words) != 5
            or words[:2] != ["shown", "1"]
            or not all(w.isdigit() for w in words[2:])
        ):
            return None
        records: list[tuple[int, bytes]] = []
        for line in rest:
            seq, _, data = line.partition(" ")
            if not seq.isdigit() or not data:
                return None
            records.append((int(seq), data.encode()))
        return cls(int(words[2]), int(words[3]), int(words[4]), records)

    def after(self, applied: int) -> list[tuple[int, bytes]]:
        """Its entries past `applied` (the run that ended there counts as shown)."""
        return [(seq, data) for seq, data in self.records if seq > applied]

"""Decode throughput of a long streamed answer: typed decoder against bare `json.loads`.

The stream is synthetic but shaped like a real pi answer of `--deltas` text deltas of
"tok ", built from the record shapes of the recorded transcripts (`a_plain`) when they
are next to the repository, from a built-in copy of those shapes otherwise:

- 0.73.1: every `message_update` carries the whole answer so far twice (`message` and
  `assistantMessageEvent.partial`), so 2000 deltas make ~17.7 MB (docs/rpc.md, "Update sizes");
- 0.87.1: deltas only, ~0.5 MB for the same answer;
- 1.5.2: as 0.87.1, but each update's `usage` is filled in as the answer streams (with
  `reasoning` and `cost.totalFromProvider`), and `agent_settled` says `aborted`. Its
  template is the project's own recording (tests/fixtures/transcripts/p152/a_plain).

On the same bytes it times (a) "bare": `bytes.split(b"\\n")` + `json.loads` per line;
(b) "typed": `LineSplitter().feed(stream)` + `decode_record` per record; (c) "decode":
`decode_record` alone on pre-split records; (d) "streamed": what the client's reader
does, `feed` on 64 KiB chunks with each record decoded as it comes out. Each is warmed
up once, then the best of `--repeat` runs counts. A ratio is bare time / that path's
time: above 1 the path is faster than bare `json.loads`.

glibc's malloc adapts its thresholds to what the process frees: once a large block is
freed it keeps freed memory instead of handing it back to the kernel after every run.
Left alone, whichever path first frees such a block decides whether every later run of
every path pays ~3,000 page faults (a quarter of bare's time), so the timings measured
the allocator's history more than the code. The script pins the two thresholds where
glibc's own adjustment puts them in a long-running process (`--malloc-default` leaves
them alone).

Run from the repository root: `.venv/bin/python bench/rpc_decode.py [--deltas N]
[--repeat N] [--malloc-default] [--json]` (or `python -m bench.rpc_decode`).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    # Run as a script: measure this checkout's `bridge`, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydantic
import pydantic_core

from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.events import UnknownEvent
from bridge.rpc.framing import LineSplitter, OversizedRecord

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPTS = REPO.parent / "shared" / "protocol" / "transcripts"
FIXTURES = REPO / "tests" / "fixtures" / "transcripts"  # the project's own recordings
DELTA = "tok "
MB = 1_000_000
# anyio's `ByteReceiveStream` iteration reads a subprocess pipe by `receive(65536)`.
CLIENT_CHUNK = 65536

Record = dict[str, Any]

# --- the stream ----------------------------------------------------------------------

_USAGE: Record = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}
_USER: Record = {
    "role": "user",
    "content": [{"type": "text", "text": "hello there"}],
    "timestamp": 1795344839290,
}
_ASSISTANT: Record = {
    "role": "assistant",
    "content": [],
    "api": "openai-completions",
    "provider": "fake",
    "model": "fake-model",
    "usage": _USAGE,
    "stopReason": "stop",
    "timestamp": 1795344839356,
    "responseId": "chatcmpl-e9b7b43cb39f",
}


def _builtin_0731() -> list[Record]:
    """The records of v0731/a_plain, one delta kept, in case the transcript is absent."""

    def update(event: Record) -> Record:
        snapshot = {**event, "partial": _ASSISTANT}
        return {"type": "message_update", "assistantMessageEvent": snapshot, "message": _ASSISTANT}

    return [
        {"type": "agent_start"},
        {"type": "turn_start"},
        {"type": "message_start", "message": _USER},
        {"type": "message_end", "message": _USER},
        {"type": "message_start", "message": _ASSISTANT},
        update({"type": "text_start", "contentIndex": 0}),
        update({"type": "text_delta", "contentIndex": 0, "delta": DELTA}),
        update({"type": "text_end", "contentIndex": 0, "content": ""}),
        {"type": "message_end", "message": _ASSISTANT},
        {"type": "turn_end", "message": _ASSISTANT, "toolResults": []},
        {"type": "agent_end", "messages": [_USER, _ASSISTANT]},
    ]


def _builtin_0871() -> list[Record]:
    """0.87.1's shape of the same run: usage instead of snapshots, then agent_settled."""
    out: list[Record] = []
    for rec in _builtin_0731():
        if rec["type"] == "message_update":
            event = {k: v for k, v in rec["assistantMessageEvent"].items() if k != "partial"}
            rec = {"type": "message_update", "usage": _USAGE, "assistantMessageEvent": event}
        out.append(rec)
    return [*out, {"type": "agent_settled"}]


_LIVE_USAGE: Record = {
    "input": 610,
    "output": 11,
    "cacheRead": 0,
    "cacheWrite": 0,
    "reasoning": 0,
    "totalTokens": 621,
    "cost": {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 0,
        "totalFromProvider": False,
    },
}


def _builtin_152() -> list[Record]:
    """1.5.2's shape: 0.87.1's with the usage filled in while streaming, `aborted`."""
    out: list[Record] = []
    for rec in _builtin_0871():
        if rec["type"] == "message_update":
            rec = {**rec, "usage": _LIVE_USAGE}
        elif rec["type"] == "agent_settled":
            rec = {**rec, "aborted": False}
        out.append(rec)
    return out


SHAPES: dict[str, tuple[Path, Callable[[], list[Record]]]] = {
    "0.73.1": (TRANSCRIPTS / "v0731", _builtin_0731),
    "0.87.1": (TRANSCRIPTS / "e0871", _builtin_0871),
    "1.5.2": (FIXTURES / "p152", _builtin_152),
}


def load_template(shape: str) -> tuple[list[Record], str]:
    """The template records of one shape (responses dropped) and where they came from."""
    folder, builtin = SHAPES[shape]
    path = folder / "a_plain.stdout.jsonl"
    if not path.is_file():
        return builtin(), "built-in template"
    records = [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
    kept = [r for r in records if r.get("type") != "response"]
    where = (
        folder.relative_to(REPO) if folder.is_relative_to(REPO) else f"transcripts/{folder.name}"
    )
    return kept, f"{where}/a_plain"


def _is_text_delta(rec: Record) -> bool:
    if rec.get("type") != "message_update":
        return False
    return bool(rec["assistantMessageEvent"].get("type") == "text_delta")


def _fill(node: Any, text: str) -> Any:
    """A copy of `node` whose assistant messages and text events hold `text`."""
    if isinstance(node, list):
        return [_fill(x, text) for x in node]
    if not isinstance(node, dict):
        return node
    if node.get("role") == "assistant":
        blocks = [{"type": "text", "text": text}] if text or node.get("content") else []
        return {**node, "content": blocks}
    out = {k: _fill(v, text) for k, v in node.items()}
    if out.get("type") == "text_delta":
        out["delta"] = DELTA
    elif out.get("type") == "text_end":
        out["content"] = text
    return out


def _line(rec: Record) -> bytes:
    # The agent writes JSON.stringify output: compact, non-ASCII kept raw.
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def build_stream(template: list[Record], deltas: int) -> bytes:
    """The template's run with its text deltas replaced by `deltas` deltas of "tok "."""
    if not any(_is_text_delta(r) for r in template):
        raise ValueError("the template has no text_delta record")
    lines: list[bytes] = []
    text = ""
    for rec in template:
        if not _is_text_delta(rec):
            lines.append(_line(_fill(rec, text)))
        elif not text:  # the first delta of the template stands for all of them
            for _ in range(deltas):
                text += DELTA
                lines.append(_line(_fill(rec, text)))
    return b"".join(lines)


# --- the four paths ------------------------------------------------------------------


def bare(stream: bytes) -> int:
    n = 0
    for line in stream.split(b"\n"):
        if line:
            json.loads(line)
            n += 1
    return n


def typed(stream: bytes) -> int:
    # One feed holds every record of the stream at once (one copy of each next to the
    # stream itself); the client never does that, see `streamed`.
    splitter = LineSplitter()
    n = 0
    for frame in [*splitter.feed(stream), *splitter.close()]:
        if isinstance(frame, bytes):
            decode_record(frame)
            n += 1
    return n


def decode_only(records: list[bytes]) -> int:
    for record in records:
        decode_record(record)
    return len(records)


def streamed(chunks: list[bytes]) -> int:
    splitter = LineSplitter()
    n = 0
    for chunk in chunks:
        for frame in splitter.feed(chunk):
            if isinstance(frame, bytes):
                decode_record(frame)
                n += 1
    return n + len(splitter.close())


def check(stream: bytes, records: list[bytes]) -> None:
    """Every record must take the typed fast path, or the timings compare other work."""
    for record in records:
        out = decode_record(record)
        if isinstance(out, MalformedRecord | OversizedRecord | UnknownEvent):
            raise SystemExit(f"not a known record: {out!r}")
    chunks = _chunks(stream)
    counts = {bare(stream), typed(stream), decode_only(records), streamed(chunks)}
    if counts != {len(records)}:
        raise SystemExit(f"the paths disagree on the record count: {counts}")


def _chunks(stream: bytes) -> list[bytes]:
    return [stream[i : i + CLIENT_CHUNK] for i in range(0, len(stream), CLIENT_CHUNK)]


# --- measuring ----------------------------------------------------------------------

# mallopt(3) parameters; the values are where glibc's dynamic adjustment ends up on
# 64-bit: the largest mmap threshold, and a trim threshold of twice that.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
PINNED_MMAP = 32 * 1024 * 1024
PINNED_TRIM = 2 * PINNED_MMAP


def pin_malloc() -> str:
    """Fix glibc's mmap and trim thresholds for the rest of the process; say what was done."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "default (no mallopt)"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, PINNED_MMAP) != 1 or mallopt(M_TRIM_THRESHOLD, PINNED_TRIM) != 1:
        return "default (mallopt refused)"
    return f"pinned (mmap {PINNED_MMAP >> 20} MiB, trim {PINNED_TRIM >> 20} MiB)"


PATHS = (
    ("bare", "split + json.loads"),
    ("typed", "feed(stream) + decode_record"),
    ("decode", "decode_record on pre-split records"),
    ("streamed", "feed(64 KiB chunks) + decode_record"),
)


@dataclass(frozen=True, slots=True)
class Timing:
    path: str
    seconds: float
    records_per_s: float
    mb_per_s: float
    ratio: float  # bare time / this path's time: above 1, faster than bare


@dataclass(frozen=True, slots=True)
class ShapeResult:
    shape: str
    source: str
    deltas: int
    bytes: int
    records: int
    largest_record: int
    timings: list[Timing]


def best_of(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: caches, allocator arenas, lazily built validators
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(shape: str, deltas: int, repeat: int) -> ShapeResult:
    template, source = load_template(shape)
    stream = build_stream(template, deltas)
    records = [r for r in stream.split(b"\n") if r]
    chunks = _chunks(stream)
    check(stream, records)
    runs: dict[str, Callable[[], object]] = {
        "bare": lambda: bare(stream),
        "typed": lambda: typed(stream),
        "decode": lambda: decode_only(records),
        "streamed": lambda: streamed(chunks),
    }
    seconds = {path: best_of(runs[path], repeat) for path, _ in PATHS}
    timings = [
        Timing(p, t, len(records) / t, len(stream) / MB / t, seconds["bare"] / t)
        for p, t in seconds.items()
    ]
    largest = max(map(len, records))
    return ShapeResult(shape, source, deltas, len(stream), len(records), largest, timings)


# --- output --------------------------------------------------------------------------

COLUMNS = ("shape", "path", "ms", "records/s", "MB/s", "bare/path")


def table(results: list[ShapeResult]) -> str:
    rows = [list(COLUMNS)]
    for r in results:
        for t in r.timings:
            speed = [f"{t.records_per_s:,.0f}", f"{t.mb_per_s:,.1f}", f"{t.ratio:.2f}"]
            rows.append([r.shape, t.path, f"{t.seconds * 1000:.1f}", *speed])
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = []
    for row in rows:
        head = [c.ljust(w) for c, w in zip(row[:2], widths, strict=False)]
        tail = [c.rjust(w) for c, w in zip(row[2:], widths[2:], strict=True)]
        lines.append("  ".join(head + tail))
    return "\n".join(lines)


def environment(malloc: str) -> dict[str, str]:
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else ()
    return {
        "python": platform.python_version(),
        "pydantic": pydantic.VERSION,
        "pydantic-core": pydantic_core.__version__,
        "cpus": str(len(cpus) or os.cpu_count()),
        "machine": platform.machine(),
        "malloc": malloc,
    }


def report(results: list[ShapeResult], repeat: int, malloc: str) -> str:
    lines = [" ".join(f"{k} {v}," for k, v in environment(malloc).items()).rstrip(",")]
    for r in results:
        lines.append(
            f"{r.shape} stream ({r.source}): {r.deltas} deltas, {r.bytes / MB:.2f} MB, "
            f"{r.records} records, largest {r.largest_record / 1000:.1f} KB"
        )
    lines += [f"{path:<9} {what}" for path, what in PATHS]
    lines += [f"best of {repeat} after a warm-up; bare/path = bare time / path time", ""]
    return "\n".join([*lines, table(results)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--deltas", type=int, default=2000, help="text deltas (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument(
        "--malloc-default",
        action="store_true",
        help="leave glibc's malloc thresholds adaptive (timings then depend on run order)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.deltas < 1 or args.repeat < 1:
        parser.error("--deltas and --repeat must be positive")
    malloc = "default" if args.malloc_default else pin_malloc()
    results = [measure(shape, args.deltas, args.repeat) for shape in SHAPES]
    if args.json:
        doc = {"environment": environment(malloc), "repeat": args.repeat}
        print(json.dumps({**doc, "results": [asdict(r) for r in results]}, indent=2))
    else:
        print(report(results, args.repeat, malloc))


if __name__ == "__main__":
    main()

"""A scripted stand-in agent for benchmarks: speaks the pi RPC protocol, streams on cue.

Run as a process (`python bench/standin_stream_agent.py --deltas N --rate R
--delta-size C [--stamps FILE] [--shape delta|snapshot]`). It answers the client's
start-up like pi 0.73.1 (the junk probe line gets an id-less `parse` error, `get_state`
a state with a `sessionFile`, `get_available_thinking_levels` an "Unknown command"
error, so the client picks the plain `pi` profile) and `get_commands`, `abort`,
`steer`, `follow_up`. On `prompt` it answers success, then streams one answer:
`agent_start`, `turn_start`, the user message, the assistant `message_start`,
`text_start`, N `text_delta` updates of C characters at R per second, `text_end`,
`message_end`, `turn_end`, `agent_end` (`willRetry: false`) with a realistic assistant
message. The final text ends with a line `[end <id>]` naming the prompt, so a benchmark
can tell from the chat when a given answer is complete.

A prompt can override the defaults for its own run with `key=value` words in its
text: `deltas=`, `rate=`, `size=`, `id=` (e.g. `"bench id=c7 deltas=0"`), and
`backlog=` (the first N of the deltas written at once, as fast as they go: the records
of a run that has been streaming for a while already; the rest at `rate`). With
`marks=1` each delta is its sequence marker `d<n> ` (n from 1) instead of `size`
characters, and at the end of the run the stamps file gets one line
`<time> emits <id> <t1> <t2> …`: the monotonic time just before each delta was
written, so a benchmark can tell how long each piece of text took to show. The
benchmarks read those lines back with `read_emits` and find the markers in a chat's
text with `MARK`: a marker holds no character that Markdown, MarkdownV2 or Slack
mrkdwn escape, and the answer is one paragraph of them, so a split into several chat
messages falls at a space between two markers.

`--shape delta` (default) writes `message_update` as 0.87.1 does (deltas only);
`--shape snapshot` as 0.73.1 does (the whole message so far, twice, in every update),
whose bytes grow quadratically with the answer.

With `--stamps FILE`, every command line read is appended to FILE as
`<time.monotonic()> <command type> <message or ->`: on Linux `time.monotonic()` is
the system-wide CLOCK_MONOTONIC, so a benchmark can compare it with its own clock.

CPU: the stream is paced by sleeping until each delta's due time (no busy waiting),
and each record is one `write` of pre-encoded bytes, so a few hundred deltas a second
cost the stand-in little next to the bridge that reads them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from pathlib import Path

Record = dict[str, Any]

# Marker `d<n>` in a chat's text: a whole word, so `d1` is not read out of `d12`, nor a
# marker out of a version string or a Slack timestamp.
MARK = re.compile(r"(?<![\w.])d(\d+)(?![\w.])")

# Records one run writes besides its N deltas: the prompt response, agent_start,
# turn_start, user message_start/end, assistant message_start, text_start, text_end,
# message_end, turn_end, agent_end.
RECORDS_PER_RUN = 11

_USAGE: Record = {
    "input": 812,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 812,
    "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0, "cacheWrite": 0, "total": 0.0},
}


def read_emits(stamps: Path) -> dict[str, list[float]]:
    """Run id → monotonic emit time of each delta (index 0 is `d1`) from a stamps file
    that `marks=1` runs wrote to; `{}` when the file does not exist."""
    out: dict[str, list[float]] = {}
    if not stamps.exists():
        return out
    for line in stamps.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "emits":
            out[parts[2]] = [float(t) for t in parts[3:]]
    return out


def records_per_run(deltas: int) -> int:
    """Records on stdout for one prompt's run (the benchmark counts events with it)."""
    return deltas + RECORDS_PER_RUN


@dataclass(frozen=True, slots=True)
class Script:
    deltas: int
    rate: float
    size: int
    run_id: str
    marks: bool = False
    backlog: int = 0  # of the deltas, written at once first: a run that began long ago


class Agent:
    def __init__(self, defaults: Script, shape: str, stamps: BinaryIO | None, session: str) -> None:
        self.defaults = defaults
        self.shape = shape
        self.stamps = stamps
        self.session_file = session
        self._out = sys.stdout.buffer
        self._lock = threading.Lock()  # the streaming thread and the reader both write
        self._run: threading.Thread | None = None
        self._abort = threading.Event()
        self._runs = 0

    # --- output ----------------------------------------------------------------------

    def emit(self, obj: Record) -> None:
        line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()

    def respond(self, command: Record, *, success: bool = True, **extra: Any) -> None:
        record: Record = {"type": "response", "command": command.get("type"), "success": success}
        if "id" in command:
            record["id"] = command["id"]
        self.emit({**record, **extra})

    # --- commands ----------------------------------------------------------------------

    def handle(self, command: Record) -> None:
        kind = command.get("type")
        if kind == "get_state":
            self.respond(command, data=self._state())
        elif kind == "get_commands":
            self.respond(command, data={"commands": []})
        elif kind == "prompt":
            if self.busy:
                self.respond(command, success=False, error="Agent is already processing.")
                return
            self.respond(command)
            self._start(self._script(str(command.get("message", ""))))
        elif kind in ("steer", "follow_up"):
            self.respond(command)
        elif kind == "abort":
            run = self._run
            if run is not None:
                self._abort.set()
                run.join()
            self.respond(command)
        else:
            # 0.73.1 leaves the id out of this error (docs/rpc.md, "Correlation by `id`,
            # then by command name"); for
            # get_available_thinking_levels it makes the client choose the `pi` profile.
            self.emit(
                {
                    "type": "response",
                    "command": kind,
                    "success": False,
                    "error": f"Unknown command: {kind}",
                }
            )

    @property
    def busy(self) -> bool:
        return self._run is not None and self._run.is_alive()

    def _state(self) -> Record:
        return {
            "model": {"provider": "fake", "id": "fake-model"},
            "thinkingLevel": "off",
            "isStreaming": self.busy,
            "isCompacting": False,
            "steeringMode": "one-at-a-time",
            "followUpMode": "one-at-a-time",
            "sessionFile": self.session_file,
            "sessionId": "standin",
            "autoCompactionEnabled": False,
            "messageCount": 4 * self._runs,
            "pendingMessageCount": 0,
        }

    def _script(self, message: str) -> Script:
        words = dict(w.split("=", 1) for w in message.split() if "=" in w)
        d = self.defaults
        return Script(
            deltas=int(words.get("deltas", d.deltas)),
            rate=float(words.get("rate", d.rate)),
            size=int(words.get("size", d.size)),
            run_id=words.get("id", f"run{self._runs + 1}"),
            marks=words.get("marks", "0") not in ("", "0"),
            backlog=int(words.get("backlog", "0")),
        )

    def _start(self, script: Script) -> None:
        self._runs += 1
        self._abort.clear()
        self._run = threading.Thread(target=self._stream, args=(script,), daemon=True)
        self._run.start()

    # --- the run -----------------------------------------------------------------------

    def _stream(self, script: Script) -> None:
        now_ms = int(time.time() * 1000)
        user: Record = {
            "role": "user",
            "content": [{"type": "text", "text": f"bench id={script.run_id}"}],
            "timestamp": now_ms,
        }
        assistant: Record = {
            "role": "assistant",
            "content": [],
            "api": "openai-completions",
            "provider": "fake",
            "model": "fake-model",
            "usage": _USAGE,
            "stopReason": "stop",
            "timestamp": now_ms,
            "responseId": f"chatcmpl-{script.run_id}",
        }
        self.emit({"type": "agent_start"})
        self.emit({"type": "turn_start"})
        self.emit({"type": "message_start", "message": user})
        self.emit({"type": "message_end", "message": user})
        self.emit({"type": "message_start", "message": assistant})
        self._update(assistant, {"type": "text_start", "contentIndex": 0}, "")
        piece = ("tok " * (script.size // 4 + 1))[: script.size]
        text = self._deltas(script, assistant, piece)
        aborted = self._abort.is_set()
        self._update(assistant, {"type": "text_end", "contentIndex": 0, "content": text}, text)
        final = f"{text}\n\n[end {script.run_id}]"
        done = {
            **assistant,
            "content": [{"type": "text", "text": final}],
            "usage": {**_USAGE, "output": script.deltas, "totalTokens": 812 + script.deltas},
            "stopReason": "aborted" if aborted else "stop",
        }
        self.emit({"type": "message_end", "message": done})
        self.emit({"type": "turn_end", "message": done, "toolResults": []})
        self.emit({"type": "agent_end", "messages": [user, done], "willRetry": False})

    def _deltas(self, script: Script, assistant: Record, piece: str) -> str:
        parts: list[str] = []
        emitted: list[float] = []
        step = 1.0 / script.rate if script.rate > 0 else 0.0
        due = time.monotonic()
        for n in range(script.deltas):
            if self._abort.is_set():
                break
            if n < script.backlog:  # at once: the pace starts after the backlog
                due = time.monotonic()
            else:
                due += step
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # behind schedule: catch up without sleeping
            if script.marks:
                piece = f"d{len(parts) + 1} "
                emitted.append(time.monotonic())
            parts.append(piece)
            event = {"type": "text_delta", "contentIndex": 0, "delta": piece}
            self._update(assistant, event, "".join(parts) if self.shape == "snapshot" else "")
        if script.marks and self.stamps is not None:
            # One line per run, written after the stream: no file I/O between deltas.
            times = " ".join(f"{t:.6f}" for t in emitted)
            self.stamps.write(f"{time.monotonic():.9f} emits {script.run_id} {times}\n".encode())
            self.stamps.flush()
        return "".join(parts)

    def _update(self, assistant: Record, event: Record, text: str) -> None:
        if self.shape == "snapshot":
            partial = {**assistant, "content": [{"type": "text", "text": text}] if text else []}
            record = {
                "type": "message_update",
                "assistantMessageEvent": {**event, "partial": partial},
                "message": partial,
            }
        else:
            record = {"type": "message_update", "usage": _USAGE, "assistantMessageEvent": event}
        self.emit(record)

    # --- the loop ----------------------------------------------------------------------

    def serve(self) -> None:
        for raw in sys.stdin.buffer:
            seen = time.monotonic()
            line = raw.strip()
            if not line:
                continue
            try:
                command = json.loads(line)
            except ValueError as exc:
                self._stamp(seen, "junk", "-")
                self.emit(
                    {
                        "type": "response",
                        "command": "parse",
                        "success": False,
                        "error": f"Failed to parse command: {exc}",
                    }
                )
                continue
            if not isinstance(command, dict):
                continue
            message = command.get("message")
            self._stamp(
                seen, str(command.get("type")), message if isinstance(message, str) else "-"
            )
            self.handle(command)
        run = self._run
        if run is not None:
            self._abort.set()
            run.join()

    def _stamp(self, seen: float, kind: str, message: str) -> None:
        if self.stamps is not None:
            # One write per line (append mode): lines of agents sharing the file stay whole.
            flat = " ".join(message.split()) or "-"
            self.stamps.write(f"{seen:.9f} {kind} {flat}\n".encode())
            self.stamps.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--deltas", type=int, default=100, help="text deltas per answer")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas per second (0: at once)")
    parser.add_argument("--delta-size", type=int, default=4, help="characters per delta")
    parser.add_argument("--shape", choices=("delta", "snapshot"), default="delta")
    parser.add_argument("--stamps", help="append a line per command read to this file")
    parser.add_argument("--session-dir", default=".", help="(as pi) where the session lives")
    # The bridge also passes `--session FILE` on a respawn; anything else is ignored too.
    args, _ = parser.parse_known_args(argv)
    defaults = Script(args.deltas, args.rate, args.delta_size, "")
    session = f"{args.session_dir.rstrip('/')}/standin-session.jsonl"
    stamps = open(args.stamps, "ab") if args.stamps else None  # noqa: SIM115 (lives as long as the process)
    try:
        Agent(defaults, args.shape, stamps, session).serve()
    finally:
        if stamps is not None:
            stamps.close()


if __name__ == "__main__":
    main()

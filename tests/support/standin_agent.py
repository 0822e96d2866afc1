"""A tiny stand-in agent that speaks the pi RPC protocol badly on purpose.

Run as a process (`python tests/support/standin_agent.py`), it answers like pi 0.73.1
(`get_state`, id-less "Unknown command" errors, a `parse` error for bad JSON) and
on `prompt` writes what a real agent never should: a non-JSON line, a record
larger than the client's cap, a JSON array, an unknown event type, a known event
with a broken shape, and a record split over several writes with U+2028 inside,
before a normal short run. The client must keep going through all of it.
"""

from __future__ import annotations

import json
import sys
import time

OVERSIZE = 300_000  # tests run the client with a 64 KiB cap


def out(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def emit(obj: dict[str, object]) -> None:
    out(json.dumps(obj, ensure_ascii=False).encode() + b"\n")


def bad_run() -> None:
    out(b"this is not json at all\n")
    out(b'{"type":"message_update","x":"' + b"y" * OVERSIZE + b'"}\n')
    out(b"[1, 2, 3]\n")
    emit({"type": "brand_new_event", "detail": {"kept": True}})
    emit({"type": "tool_execution_start", "toolName": "bash"})  # no toolCallId
    emit({"type": "agent_start"})
    half = json.dumps(
        {
            "type": "message_update",
            "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "A\u2028B"},
        },
        ensure_ascii=False,
    ).encode()
    out(half[:7])
    time.sleep(0.05)
    out(half[7:] + b"\r\n")
    emit({"type": "agent_end", "messages": []})


def answer(command: dict[str, object]) -> None:
    kind, cid = command.get("type"), command.get("id")
    if kind == "get_state":
        emit(
            {
                "id": cid,
                "type": "response",
                "command": kind,
                "success": True,
                "data": {"isStreaming": False, "sessionFile": None, "messageCount": 0},
            }
        )
    elif kind == "prompt":
        emit({"id": cid, "type": "response", "command": kind, "success": True})
        bad_run()
    elif kind in ("abort", "steer", "follow_up"):
        emit({"id": cid, "type": "response", "command": kind, "success": True})
    else:
        # 0.73.1 leaves the id out of this error (docs/rpc.md, "Correlation by `id`,
        # then by command name").
        emit(
            {
                "type": "response",
                "command": kind,
                "success": False,
                "error": f"Unknown command: {kind}",
            }
        )


def main() -> None:
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if not line:
            continue
        try:
            command = json.loads(line)
        except ValueError as exc:
            emit(
                {
                    "type": "response",
                    "command": "parse",
                    "success": False,
                    "error": f"Failed to parse command: {exc}",
                }
            )
            continue
        answer(command)


if __name__ == "__main__":
    main()

"""A stand-in agent whose `export_html` answer names whatever path its environment says.

Run as a process (`python tests/support/export_standin.py`) in place of pi: it
answers the client's start-up probe like pi 0.73.1 (a parse error for the probe
line, `get_state`, an id-less "Unknown command" for what 0.73.1 lacks) and
answers `export_html` with `{"path": $STANDIN_EXPORT_PATH}`, ignoring the
`outputPath` the bridge asked for: the hostile agent of the /export review finding,
which names `/proc/self/environ`, a link to a file outside its session, or a huge file.
"""

from __future__ import annotations

import json
import os
import sys


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer(command: dict[str, object]) -> None:
    kind, cid = command.get("type"), command.get("id")
    if kind == "get_state":
        state = {"isStreaming": False, "sessionFile": None, "messageCount": 0}
        emit({"id": cid, "type": "response", "command": kind, "success": True, "data": state})
    elif kind == "export_html":
        data = {"path": os.environ.get("STANDIN_EXPORT_PATH", "")}
        emit({"id": cid, "type": "response", "command": kind, "success": True, "data": data})
    else:
        emit({"type": "response", "command": kind, "success": False, "error": f"Unknown: {kind}"})


def main() -> None:
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        try:
            command = json.loads(line)
        except ValueError as exc:
            error = f"Failed to parse command: {exc}"
            emit({"type": "response", "command": "parse", "success": False, "error": error})
            continue
        if isinstance(command, dict):
            answer(command)


if __name__ == "__main__":
    main()

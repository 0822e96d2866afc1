"""A tiny MCP server over stdio for tests: pi 1.x's built-in MCP client runs it from
the agent's `mcp.json` (tests/rpc/test_nested_calls.py).

The MCP stdio transport is JSON-RPC 2.0, one message per line. This answers
`initialize` (echoing the client's protocol version), `ping`, `tools/list` and
`tools/call` for two tools: `shout` (its text in capitals) and `refuse` (always an
error result, `isError`). Notifications get no answer; other requests get "method
not found". Standard library only, so it runs under any Python the suite has.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {
        "name": "shout",
        "description": "Answers with the text in capitals.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "refuse",
        "description": "Always fails.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "test-mcp", "version": "1.0.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "shout":
            text = str(args.get("text", "")).upper()
            return {"content": [{"type": "text", "text": f"MCP-{text}"}], "isError": False}
        return {"content": [{"type": "text", "text": f"{name} refused"}], "isError": True}
    raise LookupError(method)


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:
            reply["result"] = answer(message.get("method", ""), message.get("params") or {})
        except LookupError as exc:
            reply["error"] = {"code": -32601, "message": f"method not found: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

"""Where the bridge keeps things by default, and how the default agent is found.

The data dir holds the store, session files and the agents' workspaces; an
agent's cwd is always a workspace under it, never the bridge's own directory
(docs/security.md, "In every mode": the agent runs shell commands in its cwd).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    return Path(os.environ.get("PI_BRIDGE_DATA_DIR", "data")).resolve()


# The bridge's own agent extension (`send_file`: files from the agent to the chat).
SEND_FILE_EXTENSION = PROJECT_ROOT / "bridge" / "extensions" / "send-file.ts"
# The approval gate, added to every agent's command line while approvals are on.
GATE_EXTENSION = PROJECT_ROOT / "bridge" / "extensions" / "approval-gate.ts"


def default_agent_argv() -> list[str]:
    """`PI_BRIDGE_AGENT_COMMAND`, else the project-installed pi (else `pi` on PATH) with
    the bridge's own extension; a configured command adds `-e` itself if it wants it."""
    configured = os.environ.get("PI_BRIDGE_AGENT_COMMAND")
    if configured:
        return shlex.split(configured)
    agents = Path(os.environ.get("PI_BRIDGE_AGENTS_DIR", PROJECT_ROOT / ".agents"))
    local = agents / "bin" / "pi"
    pi = str(local) if local.exists() else "pi"
    return [pi, "--mode", "rpc", "-e", str(SEND_FILE_EXTENSION)]

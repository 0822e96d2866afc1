"""The knobs of the platform-neutral bridge, already validated.

`bridge.config` (issue: configuration) builds these from the TOML file and the
environment; tests and the console build them directly. Every duration is in
seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bridge.model import ConversationSettings

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


@dataclass(frozen=True)
class AgentOptions:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the agent's whole environment (built from an allowlist)
    # `--session-dir`/`--session` flags; off for agents without them (legacy 0.13
    # would read the bare directory argument as a first message).
    session_flags: bool = True


@dataclass(frozen=True)
class BridgeOptions:
    data_dir: Path
    agent: AgentOptions
    allowed_users: frozenset[str] | None = None  # None: anyone who can reach the bot
    approvers: frozenset[str] = frozenset()  # may answer any conversation's dialogs
    max_agents: int = 8
    idle_timeout: float = 30 * 60  # an idle agent is stopped (its session resumes later)
    max_run_time: float = 2 * 60 * 60  # a run is aborted after this, then killed
    dialog_timeout: float = 30 * 60  # for dialogs that carry no timeout of their own
    drain_timeout: float = 30.0  # on shutdown, runs may finish for this long
    dedupe_ttl: float = 24 * 60 * 60  # platforms redeliver within minutes; a day is ample
    inbox_size: int = 64  # queued messages per conversation before "slow down"
    settings: ConversationSettings = field(default_factory=ConversationSettings)

    def workspace(self, key: str) -> Path:
        return self.data_dir / "workspaces" / safe_name(key)

    def session_dir(self, key: str) -> Path:
        return self.data_dir / "sessions" / safe_name(key)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(key: str) -> str:
    """A conversation key as one path component ("slack:T1:C2:17.5" → "slack_T1_C2_17.5")."""
    name = _UNSAFE.sub("_", key).strip("._") or "conversation"
    return name[:200]

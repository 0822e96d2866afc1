"""What a host is told on its command line (`__main__.parse`)."""

from __future__ import annotations

from dataclasses import dataclass

if __package__:  # imported as bridge.rpc.agenthost.settings (tests, type checks)
    from bridge.rpc.agenthost.buffer import MEMORY_CAP, SPILL_CAP
else:  # run as the folder, isolated: its modules are top-level there
    from buffer import MEMORY_CAP, SPILL_CAP  # type: ignore[import-not-found,no-redef]


@dataclass
class Args:
    socket: str
    spill: str  # the spill file (default: beside the socket)
    command: list[str]  # the keeper's arguments: [--no-caps] EXECUTABLE ARGV...
    detach_timeout: float = 600.0  # alone this long, the host ends its agent
    run_limit: float = 7200.0  # and lets a run finish for at most this long first
    memory_cap: int = MEMORY_CAP
    total_cap: int = SPILL_CAP

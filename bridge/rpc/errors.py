"""The RPC layer's own small error tree; OS and library errors are translated
into it at the boundary (`raise ... from exc`)."""

from __future__ import annotations


class RpcError(Exception):
    """Base of every error the RPC client raises."""


class AgentStartError(RpcError):
    """The agent could not be started (missing binary, bad cwd, died at once)."""


class AgentExited(RpcError):
    """The agent process ended; pending requests fail with this."""

    def __init__(self, returncode: int | None, stderr_tail: str) -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        tail = stderr_tail.strip().splitlines()[-3:] if stderr_tail.strip() else []
        detail = f": {' | '.join(tail)}" if tail else ""
        super().__init__(f"agent exited with code {returncode}{detail}")


class RequestTimeout(RpcError):
    def __init__(self, command: str, seconds: float) -> None:
        self.command = command
        super().__init__(f"no response to {command!r} within {seconds:g} s")


class CommandFailed(RpcError):
    """The agent answered `success: false`."""

    def __init__(self, command: str, error: str | None) -> None:
        self.command = command
        self.error = error or "unknown error"
        super().__init__(f"{command} failed: {self.error}")


class Unsupported(RpcError):
    """The agent's protocol profile has no such command."""

    def __init__(self, command: str, profile: str) -> None:
        self.command = command
        super().__init__(f"the {profile} agent protocol has no {command!r} command")


class ClientClosed(RpcError):
    """The client is closing or closed; no more commands are written."""

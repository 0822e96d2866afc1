"""The bridge's approval gate, platform-neutral and pure.

bridge/extensions/approval-gate.ts asks before tool calls; `ask` reads its question,
`policy` decides whether a person must answer it, `grants` keeps "Always allow"
answers and `preview` shows what an edit or write would change.
"""

from bridge.approvals.ask import OPTIONS, PREFIX, ApprovalAsk, parse
from bridge.approvals.grants import describe, grant_for, granted, normalise_command
from bridge.approvals.policy import (
    DEFAULT_PATTERNS,
    Mode,
    check_patterns,
    pattern_name,
    reason_to_ask,
)
from bridge.approvals.preview import cut, diff_preview

__all__ = [
    "DEFAULT_PATTERNS",
    "OPTIONS",
    "PREFIX",
    "ApprovalAsk",
    "Mode",
    "check_patterns",
    "cut",
    "describe",
    "diff_preview",
    "grant_for",
    "granted",
    "normalise_command",
    "parse",
    "pattern_name",
    "reason_to_ask",
]

"""Split Markdown (or already converted text) into messages of at most `limit` characters.

Pieces are cut where a reader expects a break: at a paragraph boundary first, then
at a line end, then at a space, and only then anywhere. Cuts outside code fences
are preferred; when a fence has to be cut, the piece closes it and the next piece
reopens it with the same opening line (language included), so every piece renders
on its own.

Invariants: every piece is at most `limit` characters (Python `str` length; callers
with UTF-16 limits pass an adjusted limit); joining the pieces, minus the added
fence lines, gives back the text except for the whitespace dropped at the cuts;
no piece is empty or whitespace only. Lines are split on "\\n" only, never with
`str.splitlines()`, which would also cut at U+2028 inside the text.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# A fence line: up to three spaces, then ``` or ~~~ (or longer), then an info string.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


@dataclass(frozen=True, slots=True)
class _Fence:
    opener: str  # the line that opened it, e.g. "```python": reopened as is
    marker: str  # the run of ` or ~ that closes it

    def cost(self) -> int:
        """Characters the markers of one cut take: "\\n" + close, reopen + "\\n"."""
        return len(self.marker) + len(self.opener) + 2


class _Fences:
    """Which fence (if any) is open at each line start of a text."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] = []
        self.states: list[_Fence | None] = []
        fence: _Fence | None = None
        pos = 0
        for line in text.split("\n"):
            self.starts.append(pos)
            self.states.append(fence)
            fence = _next_state(fence, line)
            pos += len(line) + 1

    def at(self, pos: int) -> _Fence | None:
        """The fence open at `pos` (the state of the line that holds it)."""
        return self.states[bisect.bisect_right(self.starts, pos) - 1]


def _next_state(fence: _Fence | None, line: str) -> _Fence | None:
    match = _FENCE.fullmatch(line)
    if match is None:
        return fence
    run, info = match.group(1), match.group(2)
    if fence is None:
        # A backtick fence's info string may not hold a backtick (CommonMark).
        return fence if run[0] == "`" and "`" in info else _Fence(line.strip(), run)
    closes = run[0] == fence.marker[0] and len(run) >= len(fence.marker) and not info.strip()
    return None if closes else fence


@dataclass(frozen=True, slots=True)
class _Cut:
    end: int  # the piece is text[start:end]
    resume: int  # the next piece starts here (whitespace between is dropped)


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of `text`, each at most `limit` characters; `[]` for a blank text."""
    if limit < 1:
        raise ValueError(f"limit must be positive, not {limit}")
    if len(text) <= limit:
        return [text] if text.strip() else []
    fences = _Fences(text)
    pieces: list[str] = []
    pos = 0
    while pos < len(text):
        reopen = _usable(fences.at(pos), limit)
        prefix = reopen.opener + "\n" if reopen else ""
        piece, pos = _next_piece(text, pos, prefix, limit, fences)
        if piece.strip():
            pieces.append(piece)
    return pieces


def _usable(fence: _Fence | None, limit: int) -> _Fence | None:
    """A fence is closed and reopened only when its markers leave room for content."""
    return fence if fence is not None and fence.cost() < limit else None


def _next_piece(text: str, pos: int, prefix: str, limit: int, fences: _Fences) -> tuple[str, int]:
    budget = limit - len(prefix)
    if len(text) - pos <= budget:
        return prefix + text[pos:], len(text)
    cut = _choose_cut(text, pos, budget, limit, fences)
    body = prefix + text[pos : cut.end]
    fence = _usable(fences.at(cut.resume), limit)
    if fence is not None:
        body += "\n" + fence.marker
    if len(body) > limit:
        # Two fences crowd one piece: give up the markers rather than the limit.
        return prefix + text[pos : pos + budget], pos + budget
    return body, cut.resume


def _choose_cut(text: str, pos: int, budget: int, limit: int, fences: _Fences) -> _Cut:
    """The best place to end the piece starting at `pos`, by preference."""
    for sep in ("\n\n", "\n", " "):
        cut = _clean_cut(text, pos, budget, sep, fences)
        if cut is not None:
            return cut
    return _fenced_cut(text, pos, budget, limit, fences)


def _clean_cut(text: str, pos: int, budget: int, sep: str, fences: _Fences) -> _Cut | None:
    """The last `sep` within the budget that lies outside any fence."""
    end = text.rfind(sep, pos + 1, pos + budget + len(sep))
    while end > pos:
        # After a newline the next line's start tells; a space is judged by its own line.
        if fences.at(end if sep == " " else end + 1) is None:
            resume = _skip_newlines(text, end + len(sep), fences)
            return _Cut(pos + len(text[pos:end].rstrip("\n")), resume)
        end = text.rfind(sep, pos + 1, end)
    return None


def _fenced_cut(text: str, pos: int, budget: int, limit: int, fences: _Fences) -> _Cut:
    """A cut inside a fence (at a line end if one fits), or a hard cut."""
    hard = pos + budget
    fence = _usable(fences.at(hard), limit)
    room = budget - (len(fence.marker) + 1 if fence else 0)
    end = text.rfind("\n", pos + 1, pos + room + 1)
    if end > pos and _usable(fences.at(end + 1), limit) is fence:
        return _Cut(end, end + 1)
    if fence is not None:
        hard = pos + max(1, room)
    return _Cut(hard, hard)


def _skip_newlines(text: str, pos: int, fences: _Fences) -> int:
    """Blank lines at the start of a piece outside a fence are dropped."""
    while pos < len(text) and text[pos] == "\n" and fences.at(pos) is None:
        pos += 1
    return pos

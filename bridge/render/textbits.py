"""Small text helpers the renderer's parts share: Markdown code spans and blocks,
clipping, and human durations and counts.

Code spans and fences are made longer than any backtick run inside them, so
agent output can never close them early.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")


def _longest_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code_block(text: str, language: str = "") -> str:
    fence = "`" * max(3, _longest_run(text) + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def inline_code(text: str) -> str:
    if not text:
        return ""
    ticks = "`" * (_longest_run(text) + 1)
    # CommonMark strips one space on each side, so a span may start with a backtick.
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def clip(text: str, limit: int) -> str:
    """At most `limit` characters; a cut ends with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def one_line(text: str, limit: int) -> str:
    """The first line of `text`, marked when more follows, clipped to `limit`."""
    stripped = text.strip()
    first, _, rest = stripped.partition("\n")
    return clip(first.rstrip() + (" …" if rest.strip() else ""), limit)


def tail(text: str, lines: int, chars: int) -> str:
    """The last `lines` lines of `text` (at most `chars` characters), with a note of
    how many lines were left out."""
    all_lines = text.rstrip("\n").split("\n")
    kept = all_lines[-lines:] if lines > 0 else []
    body = "\n".join(kept)
    if len(body) > chars:
        body = "…" + body[len(body) - chars + 1 :]
    skipped = len(all_lines) - len(kept)
    return (f"… {skipped} more line{_s(skipped)}\n" if skipped else "") + body


def duration(seconds: float) -> str:
    """ "0.4 s", "12 s", "3 min 05 s", "1 h 02 min"."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def delay(seconds: float) -> str:
    """A wait announced ahead: "2 s", "1.5 s", "30 s", then as `duration`."""
    if seconds < 60:
        return f"{round(max(0.0, seconds), 1):g} s"
    return duration(seconds)


def count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"

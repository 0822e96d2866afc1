"""pi's session files, read for /sessions: what each one is, without trusting it.

A session file is JSON lines the agent appends, `<ISO>_<uuid>.jsonl` in the
conversation's session dir (docs/rpc.md, "Session files"): a `session` header
(its `cwd`), then entries. Those read here: `message` (the user's, the assistant's with
`usage.cost.total`, tool results; 0.87.1 also writes a `system` message holding the
whole system prompt) and `session_info` (what `set_session_name` appends in 0.73.1
and 0.87.1; the last one names the session). The legacy 0.13 writes the same
`session` and `message` entries, into the file the bridge names for it.

Invariants: reading is bounded — at most `SCAN_BYTES` of a file (its head and its
tail when larger; the counts are then lower bounds, `complete` False), and lines
over `MAX_LINE` are sketched from their first bytes, not parsed — and tolerant: a
malformed or cut line is skipped, never raised. Only regular files directly inside
the session dir are read, never through a link: the agent writes that folder, the
bridge reads with its own rights.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

SCAN_BYTES = 4 * 2**20  # a long session with tool output; the listing reads up to 24 of them
TAIL_BYTES = 256 * 2**10  # of a larger file: its last entries (a late name, the latest turns)
MAX_LINE = 256 * 2**10  # longer lines (a tool's huge output, an image) are not parsed
SKETCH_BYTES = 512  # pi writes `type` and `message.role` first: enough to classify a line

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.jsonl")
_TYPE = re.compile(rb'^\s*\{\s*"type"\s*:\s*"(\w+)"')
_ROLE = re.compile(rb'"role"\s*:\s*"(\w+)"')


@dataclass(frozen=True, slots=True)
class Summary:
    """What one session file says about itself."""

    name: str = ""  # set with /name (`session_info`); "" when never named
    first_prompt: str = ""  # the first user message's text
    messages: int = 0  # user, assistant and tool-result messages (not the system prompt)
    cost: float | None = None  # summed over assistant messages; None: none reported one
    complete: bool = True  # the whole file was read: counts are totals, not lower bounds
    cwd: str = ""  # the header's: 0.73.1 and 0.87.1 refuse to open it where that is gone


@dataclass(frozen=True, slots=True)
class SessionFile:
    name: str  # the file's name: what a button stands for, never a path
    modified: float  # unix time of its last write: the session's last activity
    summary: Summary


def summarize(lines: Iterable[bytes], *, complete: bool = True) -> Summary:
    """Fold a session file's lines (bytes, as read) into a `Summary`."""
    name, first, count, cost, cwd = "", "", 0, None, ""
    for line in lines:
        entry = _entry(line)
        kind = entry.get("type")
        if kind == "session_info" and isinstance(entry.get("name"), str):
            name = " ".join(entry["name"].split())
        if kind == "session" and not cwd and isinstance(entry.get("cwd"), str):
            cwd = entry["cwd"]
        if kind != "message" or not isinstance(entry.get("message"), dict):
            continue
        message = entry["message"]
        role = message.get("role")
        if role == "system" or not isinstance(role, str):
            continue
        count += 1
        if role == "user" and not first:
            first = _text(message.get("content")) or "(a picture)"
        spent = _cost(message) if role == "assistant" else None
        if spent is not None:
            cost = (cost or 0.0) + spent
    return Summary(name, first, count, cost, complete, cwd)


def listing(session_dir: Path, limit: int) -> list[SessionFile]:
    """The `limit` most recently written session files in `session_dir`, newest first."""
    found: list[tuple[float, str]] = []
    try:
        with os.scandir(session_dir) as entries:
            for entry in entries:
                if _NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    found.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
    except (FileNotFoundError, NotADirectoryError):
        return []
    files = []
    for modified, name in sorted(found, reverse=True)[:limit]:
        summary = read_summary(session_dir / name)
        if summary is not None:  # gone or swapped for something else meanwhile
            files.append(SessionFile(name, modified, summary))
    return files


def session_file(session_dir: Path, name: str) -> Path | None:
    """The session file `name` names directly inside `session_dir` (resolved), if it is
    a regular file there and no link; None for anything else (`../x`, a link, gone)."""
    if not _NAME.fullmatch(name):
        return None
    path = session_dir.resolve() / name  # the name has no `/`: directly inside
    try:
        status = path.lstat()
    except OSError:
        return None
    return path if stat.S_ISREG(status.st_mode) else None


def read_summary(path: Path) -> Summary | None:
    """The summary of the regular file `path` (None: missing, a link, not a file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as file:
        if status.st_size <= SCAN_BYTES:
            return summarize(file.read(SCAN_BYTES).splitlines())
        head = file.read(SCAN_BYTES - TAIL_BYTES).splitlines()[:-1]  # the last is cut
        file.seek(status.st_size - TAIL_BYTES)
        tail = file.read(TAIL_BYTES).splitlines()[1:]  # so is the first
        return summarize([*head, *tail], complete=False)


def new_session_name(now: float, ident: str | None = None) -> str:
    """A session file's name as pi makes it: its start time with `:` and `.` as `-`."""
    seconds, millis = divmod(round(now * 1000), 1000)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(seconds))
    return f"{stamp}-{millis:03d}Z_{ident or uuid.uuid4()}.jsonl"


def _entry(line: bytes) -> dict[str, Any]:
    """One line as a dict: parsed, sketched when too long to parse, else empty."""
    if len(line) > MAX_LINE:
        return _sketch(line[:SKETCH_BYTES])
    try:
        entry = json.loads(line)
    except ValueError:  # a malformed line, or one cut by a crash or the read budget
        return {}
    return entry if isinstance(entry, dict) else {}


def _sketch(head: bytes) -> dict[str, Any]:
    kind, role = _TYPE.match(head), _ROLE.search(head)
    if kind is None:
        return {}
    sketch: dict[str, Any] = {"type": kind[1].decode()}
    if role is not None:
        sketch["message"] = {"role": role[1].decode()}
    return sketch


def _text(content: object) -> str:
    """A message's text: a plain string, or its text parts joined (0.13 and later)."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return " ".join(p for p in parts if isinstance(p, str)).strip()


def _cost(message: dict[str, Any]) -> float | None:
    usage = message.get("usage")
    spent = usage.get("cost") if isinstance(usage, dict) else None
    total = spent.get("total") if isinstance(spent, dict) else None
    if isinstance(total, bool) or not isinstance(total, int | float) or total < 0:
        return None
    return float(total)

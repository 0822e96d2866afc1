"""What an `edit` or `write` would change, as a unified diff for the approval question.

The edit is applied the way pi's edit tool applies it (both 0.73.1 and 0.87.1): the
file's BOM dropped and line ends made LF, every `oldText` looked up in the original
(exactly, else after the same loose normalisation of quotes, dashes, odd spaces and
trailing blanks), each replaced once. pi hands the hook `{path, edits: [{oldText,
newText}]}`; older shapes (top-level `oldText`/`newText`, `edits` as one object or as
a JSON string) are read too. When the change cannot be placed, the diff still shows
the intended -old/+new lines, under a one-line note, so the person sees the intent.
"""

from __future__ import annotations

import difflib
import itertools
import json
import posixpath
import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.approvals.ask import ApprovalAsk

NO_NEWLINE = "\\ No newline at end of file\n"
_QUOTES = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    }
)
_SPACES = re.compile("[\u00a0\u2002-\u200a\u202f\u205f\u3000]")


class _Unplaced(Exception):
    """The edit cannot be applied to the file as read; the message says why."""


def diff_preview(ask: ApprovalAsk, read: Callable[[str], str | None]) -> str:
    """The change `ask` would make as a unified diff; "" for tools that change no file.

    `read(path)` gives a file's text, or None when it cannot be read (or is missing).
    """
    if ask.tool not in ("edit", "write") or not ask.path:
        return ""
    name = _display(ask.path, ask.cwd)
    note = "note: the question was cut short, so this preview is partial\n"
    head = note if ask.truncated else ""
    if ask.tool == "write":
        content = ask.input.get("content")
        new = content if isinstance(content, str) else ""
        current = read(ask.path)
        diff = _unified(current or "", new, name)
        if not diff:
            what = "creates it empty" if current is None else "leaves it as it is"
            diff = f"note: the write {what}: {name}\n"
        return head + diff
    edits = edits_of(ask.input)
    if not edits:
        return head + f"note: the edit names no text to replace in {name}\n"
    original = read(ask.path)
    try:
        if original is None:
            raise _Unplaced(f"could not read {name}")
        old, new = apply_edits(original, edits)
    except _Unplaced as why:
        return head + f"note: {why}; showing the intended change only\n" + _intent(edits, name)
    if old == new:
        return head + f"note: the edit changes nothing in {name}\n"
    return head + _unified(old, new, name)


def cut(diff: str, limit: int) -> tuple[str, bool]:
    """`diff` cut at a line boundary to at most `limit` characters, and whether it was.

    When not even the first line fits, that line itself is cut at `limit`.
    """
    if len(diff) <= limit:
        return diff, False
    if limit <= 0:
        return "", True
    kept = 0
    for line in diff.splitlines(keepends=True):
        if kept + len(line) > limit:
            break
        kept += len(line)
    return (diff[:kept] if kept else diff[:limit]), True


def edits_of(arguments: object) -> list[tuple[str, str]]:
    """The (oldText, newText) pairs of an edit tool's input, in any shape pi accepts."""
    if not isinstance(arguments, dict):
        return []
    listed: object = arguments.get("edits")
    if isinstance(listed, str):
        try:
            listed = json.loads(listed)
        except ValueError:
            listed = None
    if isinstance(listed, dict):
        listed = [listed]
    pairs = [_pair(item) for item in listed] if isinstance(listed, list) else []
    pairs.append(_pair(arguments))  # the old single-edit shape, appended as pi does
    return [pair for pair in pairs if pair is not None]


def apply_edits(original: str, edits: list[tuple[str, str]]) -> tuple[str, str]:
    """(the file as the tool compares it, the file after the edits), like pi's edit.

    Raises _Unplaced when an old text is empty, missing, not unique, or edits overlap.
    """
    content = _to_lf(original.removeprefix("\ufeff"))
    pairs = [(_to_lf(old), _to_lf(new)) for old, new in edits]
    if any(not old for old, _ in pairs):
        raise _Unplaced("an edit has no old text")
    loose = any(old not in content for old, _ in pairs)
    base = _loosen(content) if loose else content
    spans: list[tuple[int, int, str]] = []
    for old, new in pairs:
        # Exact first, then loose; uniqueness is always judged loosely, as pi does.
        needle = old if old in base or not loose else _loosen(old)
        if not needle or needle not in base:
            raise _Unplaced("the old text was not found in the file")
        count = _loosen(base).count(_loosen(old))
        if count > 1:
            raise _Unplaced(f"the old text appears {count} times in the file")
        start = base.index(needle)
        spans.append((start, start + len(needle), new))
    spans.sort()
    if any(a[1] > b[0] for a, b in itertools.pairwise(spans)):
        raise _Unplaced("two edits overlap")
    result = base
    for start, end, new in reversed(spans):
        result = result[:start] + new + result[end:]
    return base, result


def _pair(item: object) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return None
    old, new = item.get("oldText"), item.get("newText")
    return (old, new) if isinstance(old, str) and isinstance(new, str) else None


def _to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _loosen(text: str) -> str:
    """pi's fallback matching: NFKC, no trailing blanks, plain quotes, dashes, spaces."""
    text = unicodedata.normalize("NFKC", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _SPACES.sub(" ", text.translate(_QUOTES))


def _display(path: str, cwd: str) -> str:
    root = posixpath.normpath(cwd) if cwd else ""
    if root and path.startswith(root.rstrip("/") + "/"):
        return posixpath.relpath(path, root)
    return path


def _headers(name: str) -> tuple[str, str]:
    # Inside the working directory git-style a/ b/ names; elsewhere the path as is.
    if name.startswith(("/", "~")):
        return name, name
    return f"a/{name}", f"b/{name}"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True) if text else []


def _finish(lines: list[str]) -> str:
    """Join diff lines, marking the ones that had no newline the way `diff` does."""
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in lines)


def _unified(old: str, new: str, name: str) -> str:
    before, after = _headers(name)
    # lineterm="\n" on the headers; content lines keep their own ends.
    lines = difflib.unified_diff(_lines(old), _lines(new), before, after, n=3)
    return _finish(list(lines))


def _intent(edits: list[tuple[str, str]], name: str) -> str:
    before, after = _headers(name)
    out = [f"--- {before}\n", f"+++ {after}\n"]
    for old, new in edits:
        removed = _to_lf(old).split("\n")
        added = _to_lf(new).split("\n") if new else []
        out.append(f"@@ -?,{len(removed)} +?,{len(added)} @@\n")
        out += [f"-{line}\n" for line in removed] + [f"+{line}\n" for line in added]
    return "".join(out)

"""Saving a file a person sent into their conversation's workspace, under `inbox/`.

The name is theirs, so it is cleaned first (`safe_filename`): one path component,
no control, bidi or zero-width characters, no hidden file, at most `MAX_NAME_BYTES`
UTF-8 bytes. The workspace itself is the bridge's and trusted; `inbox/` and what is
in it are not: the inbox is opened without following a symlink and the file is
created relative to that open directory, exclusively and without following a
symlink, so nothing is ever written outside the workspace, even if a symlink is
raced in. An existing name gets a suffix (`build.log` → `build-2.log`), never
overwritten. A file is kept only when it arrived whole: more than `cap` bytes
(`TooLarge`), a failing download or a cancellation removes what was written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

INBOX = "inbox"
MAX_NAME_BYTES = 120  # a saved name's UTF-8 length, suffix and extension included
MAX_EXTENSION = 10  # characters after the last dot that count as an extension
_MAX_TRIES = 10_000  # names tried before giving up on a free one

_SEPARATORS = re.compile(r"[/\\]")
_SPACES = re.compile(r" {2,}")
# Invisible, yet not control characters (Unicode's Default_Ignorable_Code_Point minus
# category C*): Hangul fillers, variation selectors (which can smuggle a hidden text
# after any letter), the combining grapheme joiner, Khmer and Mongolian invisibles.
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164"
    "\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)


class TooLarge(Exception):
    """More than `cap` bytes arrived; nothing is left on disk."""


class UnsafePath(OSError):
    """`workspace/inbox` is a symlink or not a directory: nothing is written."""


def safe_filename(name: str, fallback: str = "file") -> str:
    """A file name that is safe on any filesystem and harmless in a prompt.

    The last path component (after `/` or `\\`), NFC, without control characters
    (category C*: also bidi overrides and zero-width marks) or other invisible ones;
    whitespace as single spaces; anything but letters (with their combining marks),
    digits, `.`, `-`, `_` and space as `_`; no leading dot (no hidden file, no `..`),
    no trailing dot or space; at most `MAX_NAME_BYTES` UTF-8 bytes, cut from the stem
    so that an extension of up to `MAX_EXTENSION` characters is kept. `fallback`
    (cleaned the same way) when nothing is left. Applying it again changes nothing.
    """
    cleaned = _clean(name) or _clean(fallback) or "file"
    return _fit(*_split(cleaned))


def _clean(name: str) -> str:
    name = _SEPARATORS.split(unicodedata.normalize("NFC", name))[-1]
    name = _IGNORABLE.sub("", name)
    out: list[str] = []
    for char in name:
        category = unicodedata.category(char)
        if category[0] == "C":
            continue
        if char.isspace():
            out.append(" ")
        elif category[0] == "L" or category == "Nd" or char in ".-_":
            out.append(char)
        elif category[0] == "M":
            # A combining mark stays on the letter (or digit) it belongs to: Hindi
            # vowel signs, Hebrew points. One left on nothing or on a `_` goes.
            if out and unicodedata.category(out[-1])[0] in "LMN":
                out.append(char)
        else:
            out.append("_")
    return _SPACES.sub(" ", "".join(out)).lstrip(". ").rstrip(". ")


def _split(name: str) -> tuple[str, str]:
    """(stem, extension with its dot, or "")."""
    stem, dot, extension = name.rpartition(".")
    if dot and stem and len(extension) <= MAX_EXTENSION:
        return stem, dot + extension
    return name, ""


def _fit(stem: str, extension: str, suffix: str = "") -> str:
    """stem + suffix + extension, the stem cut to keep it within MAX_NAME_BYTES."""
    room = MAX_NAME_BYTES - len(suffix.encode()) - len(extension.encode())
    encoded = stem.encode()
    if len(encoded) > room:
        # A character cut in half at the end is dropped whole.
        stem = encoded[:room].decode("utf-8", "ignore").rstrip(". ") or "file"
    return stem + suffix + extension


async def save(workspace: Path, name: str, chunks: AsyncIterator[bytes], cap: int) -> Path:
    """Write `chunks` to a new file under workspace/inbox/ and return its path RELATIVE
    to `workspace` (e.g. Path("inbox/build.log")).

    `name` goes through `safe_filename`; a name already taken gets a suffix before the
    extension (`build-2.log`, `build-3.log`, …). `workspace/inbox` is created when
    missing; `UnsafePath` when it is a symlink or not a directory. More than `cap`
    bytes raise `TooLarge`; that, any other error (the download failing half-way) and
    cancellation remove the partial file before propagating. No bytes make an empty
    file."""
    dir_fd = _open_inbox(workspace / INBOX)
    try:
        final, fd = _create(dir_fd, safe_filename(name))
        try:
            size = 0
            async for chunk in chunks:
                size += len(chunk)
                if size > cap:
                    raise TooLarge(f"the file is larger than {cap} bytes")
                if chunk:
                    await anyio.to_thread.run_sync(_write_all, fd, chunk)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(final, dir_fd=dir_fd)
            raise
        os.close(fd)
    finally:
        os.close(dir_fd)
    return Path(INBOX) / final


def _open_inbox(inbox: Path) -> int:
    """An fd of the inbox directory, created if missing, never through a symlink."""
    with contextlib.suppress(FileExistsError):
        inbox.mkdir(mode=0o755)  # never follows a symlink: one there is "existing"
    try:
        return os.open(inbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink; not a directory
            why = "is a symlink or not a directory"
            raise UnsafePath(exc.errno, f"the inbox {why}", str(inbox)) from exc
        raise


def _create(dir_fd: int, name: str) -> tuple[str, int]:
    """(the name used, an fd open for writing) of a new file in the directory `dir_fd`:
    `name`, else `name` with the first free suffix."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    stem, extension = _split(name)
    for n in range(1, _MAX_TRIES + 1):
        candidate = name if n == 1 else _fit(stem, extension, f"-{n}")
        try:
            return candidate, os.open(candidate, flags, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for {name!r} in the inbox")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

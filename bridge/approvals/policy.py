"""Which tool calls wait for a person: the approval mode, the risky-command patterns
and a reading of shell commands that finds what they write and what they hide.

`reason_to_ask` answers None (run without asking) or the one-line reason the chat
shows. Modes: "off" asks nothing; "dangerous" asks for `bash` commands that match a
pattern, hide what they run (bridge/approvals/indirection.py), link to or write outside
the workspace, and for `edit`/`write` outside it; "writes" asks the same for `bash` and
every `edit`/`write`; "all" asks for every tool call. Text a command runs that is
written inside it (`sh -c '…'`, `eval …`) is read as a command in turn. The reading is
rough and errs towards asking, but "dangerous" stays a tripwire against accidents and
obvious attempts: a script the agent wrote and then runs is not read. "all" is the
control; bridge/containment/sandbox.py is what contains the agent.
"""

from __future__ import annotations

import functools
import posixpath
import re
from typing import TYPE_CHECKING, Literal

from bridge.approvals import indirection
from bridge.approvals.shellwords import operands, option_value, program, read, tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.approvals.ask import ApprovalAsk
    from bridge.approvals.shellwords import Run, Simple

Mode = Literal["off", "dangerous", "writes", "all"]

OUTSIDE = "writes outside the workspace"
NO_TARGET = "names no file it writes"
EVERY_EDIT = "every edit needs approval in this mode"
EVERY_CALL = "every tool call needs approval in this mode"
LINKS_OUT = "links to a path outside the workspace"
TOO_DEEP = "nests commands too deeply to read"
_DEPTH = 4  # `sh -c` inside `eval` inside `sh -c` …: past this it asks instead of reading

# (readable name, regex) searched in the command as written and with its quotes
# removed; the name is what the chat shows ("matches `rm -rf`").
_NAMED: tuple[tuple[str, str], ...] = (
    # rm with -r/-R in any flag group (-rf, -fr, -Rv…) or --recursive, anywhere in its
    # arguments up to the end of that simple command.
    ("rm -rf", r"\brm\s(?:[^;&|\n]*\s)?(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\b"),
    # Running as another user: sudo, and doas, its BSD cousin.
    ("sudo", r"\b(?:sudo|doas)\b"),
    # Rewriting remote history: --force, --force-with-lease, -f in a flag group, or a
    # "+refspec", in `git [opts] push …`.
    (
        "git push --force",
        r"\bgit\b[^;&|\n]*\spush\b[^;&|\n]*\s"
        r"(?:--force(?:-with-lease|-if-includes)?\b|-[a-zA-Z]*f[a-zA-Z]*\b|\+\S)",
    ),
    # Deleting remote branches or tags: `:ref`, --delete, -d in a flag group, --mirror
    # and --prune (which delete what the local side lacks).
    (
        "git push --delete",
        r"\bgit\b[^;&|\n]*\spush\b[^;&|\n]*\s"
        r"(?:--delete\b|--mirror\b|--prune\b|-[a-zA-Z]*d[a-zA-Z]*\b|:[^\s:])",
    ),
    # World-writable files: chmod 777 / 0777, with or without -R.
    ("chmod 777", r"\bchmod\s(?:[^;&|\n]*\s)?0?777\b"),
    # Any recursive change of mode: one command for a whole tree.
    ("chmod -R", r"\bchmod\s(?:[^;&|\n]*\s)?(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\b"),
    # Recursive change of owner or group.
    ("chown -R", r"\bch(?:own|grp)\s(?:[^;&|\n]*\s)?(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\b"),
    # Making a file system (mkfs, mkfs.ext4, …).
    ("mkfs", r"\bmkfs(?:\.\w+)?\b"),
    # dd writing to a named output (usually a disk image or a device).
    ("dd of=", r"\bdd\b[^;&|\n]*\bof="),
    # Redirecting into a raw disk device.
    ("> /dev/sd…", r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)"),
    # Running a script straight from the network: curl/wget … | sh (or bash, zsh…).
    ("curl … | sh", r"\b(?:curl|wget)\b[^;&\n]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b"),
    # The same through process or command substitution: bash <(curl …), sh -c "$(wget …)".
    ("sh <(curl …)", r"\b(?:ba|z|da|k)?sh\b[^;&|\n]*(?:<\(|\$\()\s*(?:curl|wget)\b"),
    # Discarding uncommitted work.
    ("git reset --hard", r"\bgit\b[^;&|\n]*\sreset\b[^;&|\n]*\s--hard\b"),
    # Deleting untracked files: git clean -f, -fd, -xdf, --force.
    ("git clean -f", r"\bgit\b[^;&|\n]*\sclean\b[^;&|\n]*\s(?:-[a-zA-Z]*f[a-zA-Z]*|--force)\b"),
    # Deleting a branch whatever it holds: -D, or -d/--delete with -f/--force.
    (
        "git branch -D",
        r"\bgit\b[^;&|\n]*\sbranch\b(?:[^;&|\n]*\s-[a-zA-Z]*D[a-zA-Z]*\b"
        r"|(?=[^;&|\n]*\s(?:-[a-zA-Z]*d[a-zA-Z]*|--delete)\b)"
        r"(?=[^;&|\n]*\s(?:-[a-zA-Z]*f[a-zA-Z]*|--force)\b))",
    ),
    # The classic bash fork bomb.
    (":(){ :|:& };:", r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    # Stopping the machine.
    ("shutdown/reboot", r"\b(?:shutdown|reboot|poweroff|halt)\b"),
    # find deleting whatever it finds.
    ("find -delete", r"\bfind\b[^;&|\n]*\s-delete\b"),
    # Overwriting files so they cannot be recovered.
    ("shred", r"\bshred\b"),
    # Sending a file away: curl -T/--upload-file, -d/--data*/--json with @file, -F with
    # name=@file or <file; wget --post-file/--body-file. (`-d '{"a": 1}'` sends no file.)
    (
        "curl -T / -d @file",
        r"\bcurl\b[^;&|\n]*\s(?:-T|--upload-file\b|(?:-d|--data(?:-binary|-ascii|-urlencode)?"
        r"|--json)[\s=]*@|(?:-F|--form)[\s=]*[^\s=]*=[@<])"
        r"|\bwget\b[^;&|\n]*\s--(?:post|body)-file\b",
    ),
    # Copying to another machine: scp/rsync whose last word is host:path or rsync://.
    (
        "scp/rsync to a host",
        r"\b(?:scp|rsync)\b[^;&|\n]*\s(?:[^\s@:/]+@)?[A-Za-z0-9][\w.-]*:[^\s;&|]*"
        r"(?:\s+\d*[<>]\S*)*\s*(?:$|[;&|\n])",  # `2>&1` may follow
    ),
    # Raw network pipes (netcat and its cousins), except a port check with -z.
    ("nc", r"(?<![\w.-])(?:nc|ncat|netcat|socat)\s(?!(?:[^;&|\n]*\s)?-[a-zA-Z]*z)"),
    # Publishing a package: once out, it cannot be taken back.
    (
        "publish a package",
        r"\b(?:npm|pnpm|yarn)\s+(?:-\S+\s+)*publish(?![\w-])"
        r"|\b(?:cargo|poetry|uv|flit|hatch)\s+publish\b|\btwine\s+upload\b|\bgem\s+push\b",
    ),
)
DEFAULT_PATTERNS: tuple[str, ...] = tuple(regex for _, regex in _NAMED)
_NAMES = {regex: name for name, regex in _NAMED}
_NAME_WIDTH = 40  # a configured regex shown as its own name, cut to this


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """One error string per pattern that is not a usable regular expression."""
    errors: list[str] = []
    for index, pattern in enumerate(patterns, start=1):
        if not isinstance(pattern, str) or not pattern:
            errors.append(f"pattern {index} is empty: it would match every command")
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            errors.append(f"pattern {index} `{pattern}` is not a valid regex: {exc}")
    return errors


def pattern_name(pattern: str) -> str:
    """How the chat names a pattern: a default's readable name, else the regex itself."""
    name = _NAMES.get(pattern, pattern)
    return name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"


def reason_to_ask(
    ask: ApprovalAsk, mode: Mode, patterns: Sequence[str], workspace: str
) -> str | None:
    """None to let the call run without asking; else why a person must say yes."""
    if mode == "off":
        return None
    root = posixpath.normpath(workspace) if workspace else ""
    reason: str | None = None
    if ask.tool == "bash":
        reason = _command_reason(ask.command, ask.cwd, patterns, root)
    elif ask.tool in ("edit", "write"):
        reason = _file_reason(ask.path, root)
        if reason is None and mode == "writes":
            reason = EVERY_EDIT
    if reason is None and mode not in ("dangerous", "writes"):
        # "all", and any mode this version does not know: asking is the safe side.
        reason = EVERY_CALL
    return reason


def _command_reason(
    command: str, cwd: str | None, patterns: Sequence[str], root: str, depth: int = 0
) -> str | None:
    """Why a command line must be seen; `depth` counts the `sh -c`/`eval` it is inside."""
    if depth > _DEPTH:
        return TOO_DEEP
    plain = " ".join(tokens(command))
    for pattern in patterns:
        regex = _compiled(pattern)
        if regex is not None and (regex.search(command) or regex.search(plain)):
            return f"matches `{pattern_name(pattern)}`"
    where = cwd
    before: Simple | None = None
    for simple in read(command):
        run = program(simple.words)
        reason = (
            indirection.reason(run, simple, before)
            or _write_reason(run, simple, where, root)
            or _inner_reason(indirection.inner(run, simple, before), where, patterns, root, depth)
        )
        if reason is not None:
            return reason
        where = _moved(run, where)
        before = simple
    return None


def _inner_reason(
    texts: list[str], cwd: str | None, patterns: Sequence[str], root: str, depth: int
) -> str | None:
    """The first reason to ask about the command lines a command runs from its text."""
    for text in texts:
        reason = _command_reason(text, cwd, patterns, root, depth + 1)
        if reason is not None:
            return reason
    return None


def _file_reason(path: str, root: str) -> str | None:
    if not path:
        return NO_TARGET
    return OUTSIDE if _outside(path, "/", root) else None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    # An invalid configured pattern is reported by check_patterns at start; here it
    # must not stop every other check.
    try:
        return re.compile(pattern) if pattern else None
    except re.error:
        return None


# -- where a path may be written without asking ---------------------------------------

_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})
_FD = re.compile(r"/dev/fd/\d+|/proc/self/fd/\d+")
_SCRATCH = "/tmp"


def _under(path: str, root: str) -> bool:
    return root == "/" or path.startswith(root.rstrip("/") + "/")


def _outside(target: str, cwd: str | None, root: str, *, devices: bool = True) -> bool:
    """Whether writing `target` (as a command names it, from `cwd`) leaves the workspace.

    `cwd` None means a `cd` went somewhere unknown. Paths starting with `~`, `$` or a
    backtick cannot be read without the shell, so they count as outside. Scratch files
    under /tmp count as inside, and so do the harmless devices (/dev/null, /dev/stdout,
    …) unless `devices` is False: writing into them is harmless, `mv x /dev/null` is not.
    """
    if not target:
        return False
    if target.startswith(("~", "$", "`")):
        return True
    if posixpath.isabs(target):
        path = posixpath.normpath(target)
    elif cwd is None:
        return True
    else:
        path = posixpath.normpath(posixpath.join(cwd, target))
    if devices and (path in _DEVICES or _FD.fullmatch(path)):
        return False
    if _under(path, _SCRATCH):
        return False
    return not root or not (path == root or _under(path, root))


# -- what a simple command writes ------------------------------------------------------

_ALL_ARGS = frozenset(
    {"tee", "mv", "rm", "rmdir", "unlink", "shred", "truncate", "touch", "mkdir",
     "chmod", "chown", "chgrp"}
)  # fmt: skip
_LAST_ARG = frozenset({"cp", "install", "ln", "rsync", "scp"})
_STREAMS = frozenset({"tee", "curl", "wget"})  # they write into a device as a redirection does


def _write_reason(run: Run, simple: Simple, where: str | None, root: str) -> str | None:
    devices = run.name in _STREAMS
    if any(_outside(target, where, root) for target in simple.writes) or any(
        _outside(path, where, root, devices=devices) for path in _file_operands(run)
    ):
        return OUTSIDE
    if run.name == "ln" and any(_outside(path, base, root) for path, base in _linked(run, where)):
        return LINKS_OUT
    return None


def _file_operands(run: Run) -> list[str]:
    """The paths a known program writes (or removes), from its arguments."""
    program_name, args = run.name, run.args
    paths = operands(args)
    if program_name in _ALL_ARGS:
        return paths
    if program_name in _LAST_ARG:
        target = option_value(args, "-t", "--target-directory")
        if target is not None:
            return [target]
        if program_name == "install" and "-d" in args:
            return paths
        return paths[-1:] if len(paths) > 1 else []
    if program_name == "sed" and any(a.startswith(("-i", "--in-place")) for a in args):
        scripted = any(a.startswith(("-e", "--expression", "-f", "--file")) for a in args)
        return paths if scripted else paths[1:]
    if program_name == "curl":
        output = option_value(args, "-o", "--output")
        return [output] if output else []
    if program_name == "wget":
        output = option_value(args, "-O", "--output-document")
        return [output] if output else []
    return []


def _linked(run: Run, where: str | None) -> list[tuple[str, str | None]]:
    """(path a link points to, the directory it is relative to) for each link `ln` makes.

    A symbolic link's relative target is read from the link's directory, a hard link's
    from the working directory. A link out of the workspace lets a later write that
    looks inside (`echo x > conf/passwd`) land outside.
    """
    paths = operands(run.args)
    directory = option_value(run.args, "-t", "--target-directory")
    if directory is not None:
        sources, folder = [path for path in paths if path != directory], directory
    elif len(paths) > 1:
        link = paths[-1]
        sources, folder = paths[:-1], link if link.endswith("/") else posixpath.dirname(link)
    else:
        sources, folder = paths, "."
    symbolic = any(
        arg == "--symbolic" or (arg[:1] == "-" and arg[:2] != "--" and "s" in arg)
        for arg in run.args
    )
    if symbolic and where is not None:
        where = posixpath.normpath(posixpath.join(where, folder or "."))
    return [(source, where) for source in sources]


def _moved(run: Run, where: str | None) -> str | None:
    """The working directory after a simple command: `cd`/`pushd` change it, and a
    `cd` that cannot be followed (`cd ~`, `cd $X`, `cd -`) makes it unknown (None)."""
    if run.name not in ("cd", "pushd"):
        return where
    paths = operands(run.args)
    to = paths[0] if paths else "~"
    if to.startswith(("~", "$", "`")) or to == "-":
        return None
    if posixpath.isabs(to) or where is not None:
        return posixpath.normpath(posixpath.join(where or "/", to))
    return None

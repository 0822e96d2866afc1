"""Which tool calls wait for a person: the approval mode, the risky-command patterns
and a small reading of shell commands that finds what they write.

`reason_to_ask` answers None (run without asking) or the one-line reason the chat
shows. Modes: "off" asks nothing; "dangerous" asks for `bash` commands that match a
pattern or write outside the workspace, and for `edit`/`write` outside it; "writes"
asks the same for `bash` and every `edit`/`write`; "all" asks for every tool call.
The shell reading is deliberately rough and errs towards asking: it is a tripwire for
honest mistakes, not a sandbox (bridge/sandbox.py is that).
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from bridge.approvals.ask import ApprovalAsk

Mode = Literal["off", "dangerous", "writes", "all"]

OUTSIDE = "writes outside the workspace"
NO_TARGET = "names no file it writes"
EVERY_EDIT = "every edit needs approval in this mode"
EVERY_CALL = "every tool call needs approval in this mode"

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
    # World-writable files: chmod 777 / 0777, with or without -R.
    ("chmod 777", r"\bchmod\s(?:[^;&|\n]*\s)?0?777\b"),
    # Recursive change of owner.
    ("chown -R", r"\bchown\s(?:[^;&|\n]*\s)?(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\b"),
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
    # The classic bash fork bomb.
    (":(){ :|:& };:", r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    # Stopping the machine.
    ("shutdown/reboot", r"\b(?:shutdown|reboot|poweroff|halt)\b"),
    # find deleting whatever it finds.
    ("find -delete", r"\bfind\b[^;&|\n]*\s-delete\b"),
    # Overwriting files so they cannot be recovered.
    ("shred", r"\bshred\b"),
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


def _command_reason(command: str, cwd: str, patterns: Sequence[str], root: str) -> str | None:
    words = _tokens(command)
    plain = " ".join(words)
    for pattern in patterns:
        regex = _compiled(pattern)
        if regex is not None and (regex.search(command) or regex.search(plain)):
            return f"matches `{pattern_name(pattern)}`"
    if any(_outside(target, where, root) for target, where in _writes(words, cwd)):
        return OUTSIDE
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


def _outside(target: str, cwd: str | None, root: str) -> bool:
    """Whether writing `target` (as a command names it, from `cwd`) leaves the workspace.

    `cwd` None means a `cd` went somewhere unknown. Paths starting with `~`, `$` or a
    backtick cannot be read without the shell, so they count as outside. Scratch files
    under /tmp and the harmless devices (/dev/null, /dev/stdout, …) count as inside.
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
    if path in _DEVICES or _FD.fullmatch(path) or _under(path, _SCRATCH):
        return False
    return not root or not (path == root or _under(path, root))


# -- reading a shell command -----------------------------------------------------------

_OPERATOR_CHARS = frozenset("();<>|&")
_ROUGH = re.compile(r"[();<>|&]+|[^\s();<>|&]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_COUNT = re.compile(r"\d+(?:\.\d+)?[smhd]?")
_WRAPPERS = frozenset(
    {"sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice",
     "ionice", "stdbuf", "timeout", "xargs"}
)  # fmt: skip
_ALL_ARGS = frozenset(
    {"tee", "mv", "rm", "rmdir", "unlink", "shred", "truncate", "touch", "mkdir",
     "chmod", "chown", "chgrp"}
)  # fmt: skip
_LAST_ARG = frozenset({"cp", "install", "ln", "rsync", "scp"})


def _tokens(command: str) -> list[str]:
    """Words and operators, quotes removed. Newlines separate commands as `;` does."""
    text = command.replace("\n", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # a `#` mid-word is not a comment; reading more is safer
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the shell would fail too, read it roughly
        return _ROUGH.findall(text)


def _is_operator(token: str) -> bool:
    return bool(token) and set(token) <= _OPERATOR_CHARS


def _simple_commands(words: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(arguments, redirection targets) of each simple command, in order."""
    args: list[str] = []
    targets: list[str] = []
    index = 0
    while index < len(words):
        token = words[index]
        index += 1
        if not _is_operator(token):
            args.append(token)
            continue
        following = words[index] if index < len(words) else ""
        if token.endswith("(") or not (">" in token or "<" in token):
            # A separator (`;`, `&&`, `|`, `(`, …) or a process substitution `>(`/`<(`.
            yield args, targets
            args, targets = [], []
            continue
        if args and args[-1].isdigit():
            args.pop()  # the fd of `2>`, split from its operator by the lexer
        if _is_operator(following):
            continue
        index += 1  # the redirection's word is no argument of the command
        if ">" in token and not (following.isdigit() or following == "-"):
            targets.append(following)  # `>&2` and `>&-` name no file
    yield args, targets


def _program(args: list[str]) -> tuple[str, list[str]]:
    """The program a simple command runs (wrappers like sudo/env skipped), its args."""
    index = 0
    while index < len(args):
        word = args[index]
        if _ASSIGNMENT.fullmatch(word):
            index += 1
            continue
        name = posixpath.basename(word)
        if name not in _WRAPPERS:
            return name, args[index + 1 :]
        index += 1
        while index < len(args) and (args[index].startswith("-") or _COUNT.fullmatch(args[index])):
            index += 1
    return "", []


def _operands(args: list[str]) -> list[str]:
    after_dashes = False
    out: list[str] = []
    for arg in args:
        if after_dashes or not arg.startswith("-") or arg == "-":
            out.append(arg)
        elif arg == "--":
            after_dashes = True
    return out


def _option_value(args: list[str], short: str, long: str) -> str | None:
    """The value of `-o X`, `-oX`, `--output X` or `--output=X`, if given."""
    for index, arg in enumerate(args):
        if arg in (short, long):
            return args[index + 1] if index + 1 < len(args) else None
        if arg.startswith(long + "="):
            return arg[len(long) + 1 :]
        if len(short) == 2 and arg.startswith(short) and not arg.startswith("--"):
            return arg[2:]
    return None


def _file_operands(program: str, args: list[str]) -> list[str]:
    """The paths a known program writes (or removes), from its arguments."""
    operands = _operands(args)
    if program in _ALL_ARGS:
        return operands
    if program in _LAST_ARG:
        target = _option_value(args, "-t", "--target-directory")
        if target is not None:
            return [target]
        if program == "install" and "-d" in args:
            return operands
        return operands[-1:] if len(operands) > 1 else []
    if program == "sed" and any(a.startswith(("-i", "--in-place")) for a in args):
        scripted = any(a.startswith(("-e", "--expression", "-f", "--file")) for a in args)
        return operands if scripted else operands[1:]
    if program == "curl":
        output = _option_value(args, "-o", "--output")
        return [output] if output else []
    if program == "wget":
        output = _option_value(args, "-O", "--output-document")
        return [output] if output else []
    return []


def _writes(words: list[str], cwd: str) -> Iterator[tuple[str, str | None]]:
    """(path as written, the directory it is relative to) for each write found.

    Follows `cd`/`pushd` from one simple command to the next, so `cd /etc && rm x`
    writes outside; a `cd` it cannot follow makes the directory unknown (None).
    """
    where: str | None = cwd
    for args, targets in _simple_commands(words):
        for target in targets:
            yield target, where
        program, rest = _program(args)
        if program in ("cd", "pushd"):
            operands = _operands(rest)
            to = operands[0] if operands else "~"
            if to.startswith(("~", "$", "`")) or to == "-":
                where = None
            elif posixpath.isabs(to) or where is not None:
                where = posixpath.normpath(posixpath.join(where or "/", to))
            continue
        for path in _file_operands(program, rest):
            yield path, where

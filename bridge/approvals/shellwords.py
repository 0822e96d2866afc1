"""A rough reading of a shell command line, without running or expanding anything.

The standard library's shlex splits the words (quotes removed) and runs of the
operator characters `();<>|&`; the rest walks that list: simple commands between
separators, their redirections, whether a pipe feeds them, and the program each runs
once wrappers (`sudo`, `env`, `xargs`, …), assignments and reserved words (`then`,
`do`, …) are skipped. Nothing is expanded: `$x`, `$(…)`, backquotes and globs stay as
written, so a caller sees that a word is computed. It knows no more grammar than that
and errs towards reading too much (an unclosed quote is read roughly, not refused).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

_OPERATOR_CHARS = frozenset("();<>|&")
_ROUGH = re.compile(r"[();<>|&]+|[^\s();<>|&]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_COUNT = re.compile(r"\d+(?:\.\d+)?[smhd]?")
# `<<EOF`, `<<-EOF`, `<<'EOF'`, `<<"EOF"`, `<<\EOF`; not the here-string `<<<`.
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(?:'([^']+)'|\"([^\"]+)\"|\\?([^\s;&|<>()'\"]+))")
# Words that may stand before a command without being it.
_RESERVED = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
# Programs that run the command in their arguments, and those of their options that
# take a value (so `xargs -I {} rm {}` runs `rm`, not `{}`).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "xargs": frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"}),
    "parallel": frozenset({"-j", "-S", "--jobs"}),
}


@dataclass
class Simple:
    """One simple command: its words, and what its redirections and pipes say."""

    words: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)  # targets of `>`, `>>`, `&>`, `>|`
    herestrings: list[str] = field(default_factory=list)  # the words after `<<<`
    heredocs: list[str] = field(default_factory=list)  # the bodies of its `<<` documents
    piped: bool = False  # its input is the output of the simple command before it…
    grouped: bool = False  # …or of a whole `( … )` group that ends with that command
    substituted: bool = False  # it is handed a process substitution `<(…)`


@dataclass(frozen=True)
class Run:
    """The program a simple command runs, once wrappers and assignments are skipped."""

    name: str  # the command word's last path part, as written; "" for none
    word: str  # the command word as written
    args: list[str]
    wrappers: tuple[str, ...] = ()  # the wrappers it runs under, outermost first


def read(command: str) -> list[Simple]:
    """The simple commands of a command line, here-document bodies taken out as data."""
    text, bodies = _heredocs(command)
    return list(_simple_commands(tokens(text), bodies))


def _heredocs(command: str) -> tuple[str, list[str | None]]:
    """The command without its here-document bodies, and each `<<`'s body in order.

    A `<<` whose end line never comes (`$((1<<2))`, a typo) gets None, and the lines
    after it stay in the command, read as commands: reading more is safer.
    """
    lines = command.split("\n")
    kept: list[str] = []
    bodies: list[str | None] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        for match in _HEREDOC.finditer(line):
            delimiter = next(group for group in match.groups() if group)
            tabs = "\t" if match.group().startswith("<<-") else ""
            end = next(
                (at for at in range(index, len(lines)) if lines[at].lstrip(tabs) == delimiter),
                None,
            )
            bodies.append(None if end is None else "\n".join(lines[index:end]))
            index = index if end is None else end + 1
    return "\n".join(kept), bodies


def tokens(command: str) -> list[str]:
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


def _is_pipe(separator: str) -> bool:
    return "|" in separator and "||" not in separator


def _simple_commands(words: list[str], bodies: list[str | None]) -> Iterator[Simple]:
    """Each simple command, in order; `|`, `;`, `&&`, `(`, `<(` … separate them.

    `bodies` are the here-documents taken out of the text, one per `<<`, in order.
    """
    bodies = list(bodies)
    current = Simple()
    index = 0
    while index < len(words):
        token = words[index]
        index += 1
        if not _is_operator(token):
            current.words.append(token)
            continue
        if token.endswith("(") or not ("<" in token or ">" in token):
            current.substituted = token == "<("
            yield current
            # `tee >(sh)` feeds the `sh` as a pipe would.
            piped = _is_pipe(token) or token.endswith(">(")
            current = Simple(piped=piped, grouped=piped and token.startswith(")"))
            continue
        if current.words and current.words[-1].isdigit():
            current.words.pop()  # the fd of `2>`, split from its operator by the lexer
        following = words[index] if index < len(words) else ""
        if _is_operator(following):
            continue
        index += 1  # the redirection's word is no argument of the command
        if token.startswith("<<") and token != "<<<":
            body = bodies.pop(0) if bodies else None
            current.heredocs += [] if body is None else [body]
        _redirect(current, token, following)
    yield current


def _redirect(simple: Simple, operator: str, word: str) -> None:
    if operator == "<<<":
        simple.herestrings.append(word)
    elif ">" in operator and not (word.isdigit() or word == "-"):
        simple.writes.append(word)  # `>&2` and `>&-` name no file


def program(words: list[str]) -> Run:
    """What a simple command runs: `sudo -u x env A=1 rm y` runs `rm y` under two."""
    wrappers: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if _ASSIGNMENT.fullmatch(word) or word in _RESERVED:
            continue
        name = posixpath.basename(word)
        valued = _WRAPPERS.get(name)
        if valued is None:
            return Run(name, word, words[index:], tuple(wrappers))
        wrappers.append(name)
        while index < len(words) and (
            words[index].startswith("-") or _COUNT.fullmatch(words[index])
        ):
            index += 2 if words[index] in valued else 1
    return Run("", "", [], tuple(wrappers))


def operands(args: list[str]) -> list[str]:
    """The arguments that are not options (everything after `--` is one)."""
    after_dashes = False
    out: list[str] = []
    for arg in args:
        if after_dashes or not arg.startswith("-") or arg == "-":
            out.append(arg)
        elif arg == "--":
            after_dashes = True
    return out


def option_value(args: list[str], short: str, long: str) -> str | None:
    """The value of `-o X`, `-oX`, `--output X` or `--output=X`, if given."""
    for index, arg in enumerate(args):
        if arg in (short, long):
            return args[index + 1] if index + 1 < len(args) else None
        if arg.startswith(long + "="):
            return arg[len(long) + 1 :]
        if len(short) == 2 and arg.startswith(short) and not arg.startswith("--"):
            return arg[2:]
    return None

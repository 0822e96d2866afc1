"""Commands that hide what they run from the patterns, and the text they do run.

A pattern reads a command as written. These checks read past the ways a command can
hide what it does: a command word the shell computes (`$x -rf build`, `` `echo rm` ``),
a shell or an interpreter that runs the output of another command (`base64 -d | sh`,
`bash <(…)`), an interpreter's own code that deletes files (`shutil.rmtree`, `fs.rmSync`)
and a deleting program handed its files by `find -exec` or `xargs`. Where the text a
command runs is written inside it (`sh -c '…'`, `eval …`, `bash <<< '…'`, a here-document
into a shell, `echo '…' | sh`, `find -exec …`), `inner` hands it back, so the policy
reads it as a command of its own. Nothing here runs, decodes or expands anything: what
cannot be read is a reason to ask.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from bridge.approvals.shellwords import program

if TYPE_CHECKING:
    from bridge.approvals.shellwords import Run, Simple

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash"})
_SOURCE = frozenset({"source", "."})
_DELETERS = frozenset({"rm", "unlink", "shred"})
_FEEDERS = frozenset({"xargs", "parallel"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# The shell computes a command word whose last part holds an expansion or a glob (`$x`,
# `` `echo` ``, `r?`), or ends one begun before it (`${x:-/bin/rm}`, `"$(which rm)"`).
_EXPANDS = re.compile(r"[$`*?]")
_CLOSES = re.compile(r"[})]")
# What `echo`/`printf` print is the text written only without these.
_UNREADABLE = re.compile(r"[$`\\%]")
# Deleting through an interpreter's own library: Python's os/shutil/pathlib, node's fs,
# perl's unlink and File::Path, ruby's FileUtils/File/Dir, php's unlink/rmdir.
_DELETES = re.compile(
    r"\b(?:rmtree|remove_tree|removedirs|remove_dir|remove_entry(?:_secure)?|rm_rf|rm_r|rm_f"
    r"|rmSync|rmdirSync|unlinkSync|unlink|rmdir)\b"
    r"|\bos\.remove\b|\b(?:fs|fsp|promises|FileUtils)\.rm\b|\b(?:File|Dir)\.delete\b"
    r"|\bDeno\.remove(?:Sync)?\b"
)
# Inline code the shell makes before the interpreter sees it: `-c "$(…)"`, `-c "$code"`.
_COMPUTED_CODE = re.compile(r"^\s*\$|\$\(")

Source = Literal["code", "stdin", "file"]


@dataclass(frozen=True)
class _Lang:
    """How an interpreter is told its program on the command line."""

    code: frozenset[str]  # options whose value is code: `-c`, `-e`, `--eval`
    letters: str = ""  # a group of short options ending in one of these takes code: `-ne`
    attached: str = ""  # short options whose value is the rest of the word: `-MFoo`
    runs_file: frozenset[str] = frozenset()  # options after which a module or file runs
    valued: frozenset[str] = frozenset()  # other options that take the next word
    several: bool = False  # the code option may come more than once


_PYTHON = _Lang(frozenset({"-c"}), "c", "WX", frozenset({"-m"}), frozenset({"-W", "-X"}))
_NODE = _Lang(
    frozenset({"-e", "--eval", "-p", "--print"}),
    valued=frozenset({"-r", "--require", "--import", "--loader", "-C", "--conditions"}),
)
_LANGS: dict[str, _Lang] = {
    "node": _NODE,
    "nodejs": _NODE,
    "bun": _NODE,
    "perl": _Lang(frozenset({"-e", "-E"}), "eE", "MmIix", valued=frozenset({"-I"}), several=True),
    "ruby": _Lang(frozenset({"-e"}), "e", "rIC", valued=frozenset({"-r", "-I"}), several=True),
    "php": _Lang(frozenset({"-r"}), runs_file=frozenset({"-f"}), valued=frozenset({"-c", "-d"})),
    "deno": _Lang(frozenset({"eval"})),  # a subcommand: `deno eval CODE`
}


def reason(run: Run, simple: Simple, before: Simple | None) -> str | None:
    """Why a person must see this simple command, when it hides what it runs."""
    return _computed(run) or _fed_deletion(run) or _unseen_program(run, simple, before)


def _computed(run: Run) -> str | None:
    if _EXPANDS.search(run.name) or (_EXPANDS.search(run.word) and _CLOSES.search(run.name)):
        shown = run.word + "(…)" if run.word.endswith("$") else run.word
        return f"runs a command named by `{shown}`"
    return None


def _unseen_program(run: Run, simple: Simple, before: Simple | None) -> str | None:
    """A shell or interpreter fed a program not written here, or code that deletes."""
    lang = _lang(run.name)
    if lang is None and run.name not in SHELLS | _SOURCE:
        return None
    source, codes = _source(run, lang)
    if source != "code" and simple.substituted:
        return f"`{run.name}` runs the output of `<(…)`"
    if source == "stdin" and simple.piped and _piped_text(simple, before) is None:
        producer = "" if before is None or simple.grouped else program(before.words).name
        return f"`{run.name}` runs the output of `{producer or '…'}`"
    if lang is None or source == "file":
        return None  # a shell's own text is read as commands (`inner`); a file is not read
    if source == "code" and any(_COMPUTED_CODE.search(code) for code in codes):
        return f"`{run.name}` runs code the shell computes"
    for text in codes if source == "code" else _stdin(simple, before):
        found = _DELETES.search(text)
        if found is not None:
            return f"`{run.name}` code deletes files (`{found.group()}`)"
    return None


def inner(run: Run, simple: Simple, before: Simple | None) -> list[str]:
    """The command lines this one runs that are written inside it, to be read in turn."""
    if run.name == "eval":
        return [" ".join(run.args)]
    if run.name == "find":
        return [shlex.join(words) for words in _find_execs(run.args)]
    if run.name not in SHELLS:
        return []
    source, codes = _source(run, None)
    return codes if source == "code" else _stdin(simple, before) if source == "stdin" else []


def _fed_deletion(run: Run) -> str | None:
    """`xargs rm`, `find -exec rm {} +`: deleting files the command line does not name."""
    feeder = next((name for name in run.wrappers if name in _FEEDERS), None)
    if run.name in _DELETERS and feeder is not None:
        return f"`{run.name}` deletes the files `{feeder}` names"
    if run.name == "find":
        for words in _find_execs(run.args):
            name = program(words).name
            if name in _DELETERS:
                return f"`{name}` deletes the files `find` names"
    return None


def _find_execs(args: list[str]) -> list[list[str]]:
    """The commands of find's `-exec … ;`/`+` (a `;` may have ended the words already)."""
    found: list[list[str]] = []
    current: list[str] | None = None
    for arg in args:
        if current is None:
            current = [] if arg in _FIND_EXEC else None
        elif arg in (";", "+"):
            found.append(current)
            current = None
        else:
            current.append(arg)
    return found if current is None else [*found, current]


def _lang(name: str) -> _Lang | None:
    if re.fullmatch(r"(?:python|pypy)[\d.]*", name):
        return _PYTHON
    return _LANGS.get(name)


def _source(run: Run, lang: _Lang | None) -> tuple[Source, list[str]]:
    """Where a shell or interpreter takes its program: code on the line, stdin, a file."""
    if run.name in _SOURCE:
        return "file", []
    if lang is None:
        return _shell_source(run.args)
    return _lang_source(lang, run.args)


def _shell_source(args: list[str]) -> tuple[Source, list[str]]:
    inline = False
    index = 0
    while index < len(args) and len(args[index]) > 1 and args[index][0] in "-+":
        option = args[index]
        if option == "--":
            break
        index += 1
        if option in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 1
        elif not option.startswith("--") and "c" in option[1:]:
            inline = True  # `-c`, `-lc`, `-ec`: the first operand is the program
    index += 1 if args[index : index + 1] == ["--"] else 0
    rest = args[index:]
    if inline:
        return "code", rest[:1]
    return ("file", []) if rest and rest[0] != "-" else ("stdin", [])


def _lang_source(lang: _Lang, args: list[str]) -> tuple[Source, list[str]]:
    if args[:1] and args[0] in lang.code and not args[0].startswith("-"):
        return "code", args[1:2]
    codes: list[str] = []
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] not in ("-", "--"):
        option = args[index]
        index += 1
        name, equals, value = option.partition("=")
        if option in lang.runs_file:
            return "file", []
        if equals and name in lang.code:
            codes.append(value)
        elif option in lang.code or _ends_in_code(lang, option):
            codes.append(args[index] if index < len(args) else "")
            index += 1
        elif option in lang.valued:
            index += 1
        if codes and not lang.several:
            break
    if codes:
        return "code", codes
    index += 1 if args[index : index + 1] == ["--"] else 0
    return ("file", []) if args[index:] and args[index] != "-" else ("stdin", [])


def _ends_in_code(lang: _Lang, option: str) -> bool:
    letters = option[1:]
    return (
        letters.isalpha()
        and letters[0] not in lang.attached
        and bool(lang.letters)
        and letters[-1] in lang.letters
    )


def _stdin(simple: Simple, before: Simple | None) -> list[str]:
    """The program text a shell or interpreter reads on stdin, where it is written here."""
    piped = _piped_text(simple, before) if simple.piped else None
    return [*simple.herestrings, *simple.heredocs, *([piped] if piped is not None else [])]


def _piped_text(simple: Simple, producer: Simple | None) -> str | None:
    """What `echo`/`printf`/`cat <<EOF` pipe in, when that is plain text written here."""
    if producer is None or simple.grouped:
        return None
    run = program(producer.words)
    args = run.args
    if run.name == "cat" and not args and not producer.piped:
        documents = [*producer.herestrings, *producer.heredocs]
        if not documents:
            return None  # `cat` alone passes on what it reads, from wherever
        text = "\n".join(documents)
    elif run.name in ("echo", "printf"):
        while run.name == "echo" and args and args[0] in ("-n", "-e", "-E"):
            args = args[1:]
        text = " ".join(args)
    else:
        return None
    return None if _UNREADABLE.search(text) else text

"""How the policy finds the program a shell or an interpreter is given, one command at a time."""

from __future__ import annotations

import pytest

from bridge.approvals.indirection import inner, reason
from bridge.approvals.shellwords import Simple, program, read


def last(command: str) -> tuple[str | None, list[str]]:
    """The reason and the inner command lines of the last simple command."""
    commands = read(command)
    before: Simple | None = commands[-2] if len(commands) > 1 else None
    run = program(commands[-1].words)
    return reason(run, commands[-1], before), inner(run, commands[-1], before)


# command → the text handed back to be read as a command line
INNER: list[tuple[str, list[str]]] = [
    ("sh -c 'ls -l'", ["ls -l"]),
    ("bash -lc 'make'", ["make"]),
    ("bash -o pipefail -ec 'a | b' name arg", ["a | b"]),
    ("sh -- script.sh", []),
    ("bash script.sh -c x", []),
    ("sh", []),
    ("bash <<< 'ls'", ["ls"]),
    ("bash <<'EOF'\nls\nmake\nEOF", ["ls\nmake"]),
    ("echo 'ls; pwd' | sh", ["ls; pwd"]),
    ("echo -n ls | bash -s", ["ls"]),
    ("cat <<EOF | sh\nls\nEOF", ["ls"]),
    ("cat <<< 'ls' | sh", ["ls"]),
    ("(echo ls)|sh", []),  # a group's output is not only its last command's
    ("eval 'ls' -l", ["ls -l"]),
    ("find . -exec sh -c 'echo $1' _ {} +", ["sh -c 'echo $1' _ '{}'"]),
    ("find . -name x -execdir chmod 600 {} + -print", ["chmod 600 '{}'"]),
    ("python3 -c 'print(1)'", []),
]


@pytest.mark.parametrize(("command", "texts"), INNER)
def test_text_written_inside_a_command_is_handed_back(command: str, texts: list[str]) -> None:
    assert last(command)[1] == texts


# an interpreter's command line → whether its code deletes (None: it does not, or
# the code is in a file the gate does not read)
INTERPRETERS: list[tuple[str, str | None]] = [
    ("python3 -c 'import os; os.unlink(p)'", "`python3` code deletes files (`unlink`)"),
    ("python3.12 -W ignore -Ic 'import shutil; shutil.rmtree(p)'", "(`rmtree`)"),
    ("python -m shutil_rmtree_tool", None),
    ("python3 tool.py --unlink", None),
    ("python3 - <<'EOF'\nfrom pathlib import Path\nPath('x').unlink()\nEOF", "(`unlink`)"),
    ("echo 'import os; os.remove(1)' | python3", "(`os.remove`)"),
    ("python3 <<< 'import os; os.rmdir(1)'", "(`rmdir`)"),
    ("node --eval=\"fs.rmSync('x')\"", "(`rmSync`)"),
    ("node -r ts-node/register -e 'fs.unlinkSync(1)'", "(`unlinkSync`)"),
    ("node script.js -e unlink", None),
    ("bun -e 'await fs.promises.rm(1)'", "`bun` code deletes files (`promises.rm`)"),
    ("perl -MTime::Piece -e 'unlink 1'", "(`unlink`)"),
    ("perl -lne 'print' -e 'rmdir 1' f", "(`rmdir`)"),
    ("perl -pi -e 's/a/b/' f", None),
    ("ruby -rfileutils -e 'FileUtils.rm_rf 1'", "(`rm_rf`)"),
    ("ruby -e 'File.delete(1)'", "(`File.delete`)"),
    ("php -r 'unlink(1);'", "(`unlink`)"),
    ("php -f tool.php", None),
    ("deno eval 'await Deno.remove(1)'", "(`Deno.remove`)"),
    ('python3 -c "$(curl -s u)"', "`python3` runs code the shell computes"),
    ("python3 -c $code", "`python3` runs code the shell computes"),
    ("python3 -c \"print('$HOME')\"", None),
    ("node -e 'console.log(`${1 + 1}`)'", None),
]


@pytest.mark.parametrize(("command", "expected"), INTERPRETERS)
def test_interpreter_code_that_deletes_is_found(command: str, expected: str | None) -> None:
    found = last(command)[0]
    assert found == expected if expected is None else found is not None and expected in found


# command → why its program cannot be seen
UNSEEN: list[tuple[str, str]] = [
    ("curl -s u | bash", "`bash` runs the output of `curl`"),
    ("echo $p | sh", "`sh` runs the output of `echo`"),
    ("echo '\\x72m' | sh", "`sh` runs the output of `echo`"),
    ("(cat a; cat b) | sh", "`sh` runs the output of `…`"),
    ("source <(kubectl completion bash)", "`source` runs the output of `<(…)`"),
    ("python3 <(curl -s u)", "`python3` runs the output of `<(…)`"),
    ("tee >(sh) < x", "`sh` runs the output of `tee`"),
    ("base64 -d x | cat | sh", "`sh` runs the output of `cat`"),
    ("cat < x.b64 | sh", "`sh` runs the output of `cat`"),
    ("(base64 -d x; echo ls)|sh", "`sh` runs the output of `…`"),
]


@pytest.mark.parametrize(("command", "expected"), UNSEEN)
def test_a_program_fed_from_elsewhere_asks(command: str, expected: str) -> None:
    commands = read(command)
    found = [
        reason(program(simple.words), simple, before)
        for before, simple in zip([None, *commands], commands, strict=False)
    ]
    assert expected in found

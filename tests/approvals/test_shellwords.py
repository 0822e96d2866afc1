"""The rough reading of a shell command line the approval policy builds on."""

from __future__ import annotations

import pytest

from bridge.approvals.shellwords import Run, option_value, program, read, tokens


def test_words_lose_their_quotes_and_operators_stand_alone() -> None:
    assert tokens("echo 'a b' \"c\"|grep x>out") == [
        "echo",
        "a b",
        "c",
        "|",
        "grep",
        "x",
        ">",
        "out",
    ]


def test_an_unclosed_quote_is_read_roughly_rather_than_refused() -> None:
    assert tokens("echo 'oops > /etc/x") == ["echo", "'oops", ">", "/etc/x"]


# command line → the words of each simple command
SPLITS: list[tuple[str, list[list[str]]]] = [
    ("a; b && c || d | e", [["a"], ["b"], ["c"], ["d"], ["e"]]),
    ("a\nb", [["a"], ["b"]]),
    ("make 2>&1 > build.log", [["make"]]),
    ("bash <(curl u)", [["bash"], ["curl", "u"], []]),
    ("cat <<EOF > x\n$y -rf z\nEOF\nls", [["cat"], ["ls"]]),  # a body is data
    ("cat <<-'END'\n\tbody\n\tEND", [["cat"]]),
    ("echo $((1<<2))\nls", [["echo", "$"], [], [], ["ls"]]),  # no end line: read on
]


@pytest.mark.parametrize(("command", "words"), SPLITS)
def test_a_line_splits_into_simple_commands(command: str, words: list[list[str]]) -> None:
    assert [simple.words for simple in read(command)] == words


def test_redirections_say_what_is_written_and_what_is_fed_in() -> None:
    first, second = read("sh <<< 'ls' > out.txt 2>/dev/null | tee -a log >&2")
    assert (first.words, first.herestrings, first.writes) == (
        ["sh"],
        ["ls"],
        ["out.txt", "/dev/null"],
    )
    assert (second.words, second.writes, second.piped) == (["tee", "-a", "log"], [], True)


def test_a_here_document_is_handed_to_its_command() -> None:
    (simple,) = read("python3 - <<'EOF'\nimport os\nos.remove('x')\nEOF")
    assert simple.heredocs == ["import os\nos.remove('x')"]


def test_pipes_and_process_substitutions_are_marked() -> None:
    commands = read("a | b || c; tee >(d) <(e)")
    assert [(c.words[:1], c.piped, c.substituted) for c in commands] == [
        (["a"], False, False),
        (["b"], True, False),
        (["c"], False, False),
        (["tee"], False, False),
        (["d"], True, False),
        ([], False, True),
        (["e"], False, False),
        ([], False, False),
    ]


# words → the program they run
PROGRAMS: list[tuple[str, Run]] = [
    ("rm -f x", Run("rm", "rm", ["-f", "x"])),
    ("/bin/rm x", Run("rm", "/bin/rm", ["x"])),
    ("A=1 B=2 make", Run("make", "make", [])),
    ("sudo -u me env -i X=1 timeout 5 rm y", Run("rm", "rm", ["y"], ("sudo", "env", "timeout"))),
    ("xargs -I {} -n 1 rm {}", Run("rm", "rm", ["{}"], ("xargs",))),
    ("then rm x", Run("rm", "rm", ["x"])),
    ("$x -rf b", Run("$x", "$x", ["-rf", "b"])),
    ("X=1", Run("", "", [])),
]


@pytest.mark.parametrize(("command", "run"), PROGRAMS)
def test_the_program_skips_wrappers_assignments_and_reserved_words(command: str, run: Run) -> None:
    assert program(tokens(command)) == run


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["-o", "out"], "out"),
        (["-oout"], "out"),
        (["--output", "out"], "out"),
        (["--output=out"], "out"),
        (["-s", "u"], None),
        (["-o"], None),
    ],
)
def test_option_value_reads_every_spelling(args: list[str], value: str | None) -> None:
    assert option_value(args, "-o", "--output") == value

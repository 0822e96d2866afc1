"""The diff an approval question shows for an edit or a write."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

import pytest

from bridge.approvals.ask import ApprovalAsk
from bridge.approvals.preview import NO_NEWLINE, cut, diff_preview

if TYPE_CHECKING:
    from pathlib import Path

APP = "import os\n\n\ndef main():\n    print('hi')\n    return 0\n\n\nmain()\n"


def read_file(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except OSError:
        return None


def real_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}"
    )
    return "".join(lines)


# edit input (without path) → the replacements a plain `str.replace` makes on disk
EDITS: list[tuple[dict[str, object], list[tuple[str, str]]]] = [
    (
        {"edits": [{"oldText": "print('hi')", "newText": "print('hello')"}]},
        [("print('hi')", "print('hello')")],
    ),
    (
        {
            "edits": [
                {"oldText": "import os\n", "newText": "import os\nimport sys\n"},
                {"oldText": "    return 0\n", "newText": "    return 1\n"},
            ]
        },
        [("import os\n", "import os\nimport sys\n"), ("    return 0\n", "    return 1\n")],
    ),
    (
        {"oldText": "main()\n", "newText": "raise SystemExit(main())\n"},  # the old shape
        [("\nmain()\n", "\nraise SystemExit(main())\n")],
    ),
    ({"edits": '[{"oldText": "hi", "newText": "bye"}]'}, [("hi", "bye")]),
    ({"edits": {"oldText": "hi", "newText": "bye"}}, [("hi", "bye")]),
    ({"edits": [{"oldText": "    print('hi')\n", "newText": ""}]}, [("    print('hi')\n", "")]),
]  # fmt: skip


@pytest.mark.parametrize(("change", "replacements"), EDITS)
def test_an_edit_preview_is_the_change_it_makes(
    change: dict[str, object], replacements: list[tuple[str, str]], tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    target = tmp_path / "src" / "app.py"
    target.write_text(APP)
    ask = ApprovalAsk("edit", "c1", str(tmp_path), {"path": "src/app.py", **change}, False)
    preview = diff_preview(ask, read_file)
    after = APP
    for old, new in replacements:
        assert after.count(old) == 1
        after = after.replace(old, new)
    target.write_text(after)
    assert preview == real_diff(APP, target.read_text(), "src/app.py")


@pytest.mark.parametrize(
    ("before", "content"),
    [
        (None, "hello\nworld\n"),  # a new file
        (APP, APP.replace("hi", "hello")),
        ("old\n", ""),
        ("same\n", "same\nmore\n"),
    ],
)
def test_a_write_preview_is_the_change_it_makes(
    before: str | None, content: str, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    if before is not None:
        target.write_text(before)
    ask = ApprovalAsk(
        "write", "c1", str(tmp_path), {"path": "notes.txt", "content": content}, False
    )
    preview = diff_preview(ask, read_file)
    target.write_text(content)
    assert preview == real_diff(before or "", content, "notes.txt")


CWD = "/ws"
FILES = {"/ws/a.txt": "one\ntwo\nthree\n", "/ws/dup.txt": "x\nx\n", "/etc/hosts": "127.0.0.1 a\n"}


def edit(path: str, *pairs: tuple[str, str], truncated: bool = False) -> ApprovalAsk:
    edits = [{"oldText": old, "newText": new} for old, new in pairs]
    return ApprovalAsk("edit", "c1", CWD, {"path": path, "edits": edits}, truncated)


def write(path: str, content: str) -> ApprovalAsk:
    return ApprovalAsk("write", "c1", CWD, {"path": path, "content": content}, False)


# the call → the whole preview
PREVIEWS: list[tuple[ApprovalAsk, str]] = [
    (
        edit("a.txt", ("four", "4")),
        "note: the old text was not found in the file; showing the intended change only\n"
        "--- a/a.txt\n+++ b/a.txt\n@@ -?,1 +?,1 @@\n-four\n+4\n",
    ),
    (
        edit("missing.txt", ("a\nb", "c")),
        "note: could not read missing.txt; showing the intended change only\n"
        "--- a/missing.txt\n+++ b/missing.txt\n@@ -?,2 +?,1 @@\n-a\n-b\n+c\n",
    ),
    (
        edit("dup.txt", ("x", "y")),
        "note: the old text appears 2 times in the file; showing the intended change only\n"
        "--- a/dup.txt\n+++ b/dup.txt\n@@ -?,1 +?,1 @@\n-x\n+y\n",
    ),
    (
        edit("a.txt", ("one\ntwo", "1"), ("two\nthree", "2")),
        "note: two edits overlap; showing the intended change only\n"
        "--- a/a.txt\n+++ b/a.txt\n"
        "@@ -?,2 +?,1 @@\n-one\n-two\n+1\n@@ -?,2 +?,1 @@\n-two\n-three\n+2\n",
    ),
    (
        edit("a.txt", ("", "x")),
        "note: an edit has no old text; showing the intended change only\n"
        "--- a/a.txt\n+++ b/a.txt\n@@ -?,1 +?,1 @@\n-\n+x\n",
    ),
    (edit("a.txt", ("two", "two")), "note: the edit changes nothing in a.txt\n"),
    (
        ApprovalAsk("edit", "c1", CWD, {"path": "a.txt"}, False),
        "note: the edit names no text to replace in a.txt\n",
    ),
    (
        edit("/etc/hosts", ("a", "b")),
        "--- /etc/hosts\n+++ /etc/hosts\n@@ -1 +1 @@\n-127.0.0.1 a\n+127.0.0.1 b\n",
    ),
    (
        edit("a.txt", ("three\n", "3"), truncated=True),
        "note: the question was cut short, so this preview is partial\n"
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n two\n-three\n+3\n" + NO_NEWLINE,
    ),
    (write("empty.txt", ""), "note: the write creates it empty: empty.txt\n"),
    (write("a.txt", "one\ntwo\nthree\n"), "note: the write leaves it as it is: a.txt\n"),
    (ApprovalAsk("bash", "c1", CWD, {"command": "ls"}, False), ""),
    (ApprovalAsk("read", "c1", CWD, {"path": "a.txt"}, False), ""),
    (ApprovalAsk("write", "c1", CWD, {"content": "x"}, False), ""),
]  # fmt: skip


@pytest.mark.parametrize(("call", "expected"), PREVIEWS)
def test_previews(call: ApprovalAsk, expected: str) -> None:
    assert diff_preview(call, FILES.get) == expected


# (file on disk, old text the model sent, new text) → the lines pi would change
LOOSE: list[tuple[str, str, str, list[str]]] = [
    ("a\r\nb\r\nc\r\n", "b\n", "B\n", ["-b\n", "+B\n"]),  # CRLF file, LF edit
    ("\ufeffa\nb\n", "a\n", "A\n", ["-a\n", "+A\n"]),  # the BOM is not part of the text
    ("say(\u201chi\u201d)\n", 'say("hi")', 'say("yo")', ["-say(\"hi\")\n", '+say("yo")\n']),
    ("x = 1   \ny = 2\n", "x = 1\n", "x = 3\n", ["-x = 1\n", "+x = 3\n"]),  # trailing blanks
]  # fmt: skip


@pytest.mark.parametrize(("disk", "old", "new", "changed"), LOOSE)
def test_edits_match_like_pi_does(disk: str, old: str, new: str, changed: list[str]) -> None:
    preview = diff_preview(edit("f.txt", (old, new)), {"/ws/f.txt": disk}.get)
    assert not preview.startswith("note:"), preview
    lines = preview.splitlines(keepends=True)
    assert [line for line in lines[3:] if line[0] in "+-"] == changed


DIFF = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"


@pytest.mark.parametrize(
    ("limit", "text", "was_cut"),
    [
        (1000, DIFF, False),
        (len(DIFF), DIFF, False),
        (len(DIFF) - 1, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n", True),
        (17, "--- a/x\n+++ b/x\n", True),
        (16, "--- a/x\n+++ b/x\n", True),
        (15, "--- a/x\n", True),
        (5, "--- a", True),  # not even one line fits: that line is cut
        (0, "", True),
    ],
)
def test_cut(limit: int, text: str, was_cut: bool) -> None:
    assert cut(DIFF, limit) == (text, was_cut)
    assert len(text) <= limit


def test_cut_of_nothing() -> None:
    assert cut("", 0) == ("", False)

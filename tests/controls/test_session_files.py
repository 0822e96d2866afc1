"""Reading pi's session files for /sessions: real files the agents wrote, and the
malformed, huge and hostile ones a session folder may also hold.

The fixtures in tests/fixtures/sessions/ are session files written by pi 0.73.1,
0.87.1 (each: "remember kiwi please", a bash tool call, then `set_session_name`
"Fruit talk") and the legacy 0.13.2 (the same two prompts, no name: it has no such
command) against the fake LLM, with their paths rewritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bridge.controls.session_files import (
    MAX_LINE,
    SCAN_BYTES,
    Summary,
    listing,
    new_session_name,
    read_summary,
    session_file,
    summarize,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sessions"
CWD = "/srv/lab/ws"  # where the fixtures' agents ran (rewritten)


def line(entry: object) -> bytes:
    return json.dumps(entry).encode()


def message(role: str, content: object = "", **extra: object) -> bytes:
    return line({"type": "message", "message": {"role": role, "content": content, **extra}})


def spent(total: object) -> bytes:
    usage = {"cost": {"total": total}}
    return message("assistant", [{"type": "text", "text": "ok"}], usage=usage)


USER = message("user", [{"type": "text", "text": "remember kiwi"}])
NAMED = line({"type": "session_info", "name": "Fruit  talk\n"})
HUGE_RESULT = message("toolResult", "x" * (MAX_LINE + 1))


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("pi-0.73.1-named.jsonl", Summary("Fruit talk", "remember kiwi please", 6, 0.0, cwd=CWD)),
        # 0.87.1 also writes the system prompt as a message: not counted, not a prompt.
        ("pi-0.87.1-named.jsonl", Summary("Fruit talk", "remember kiwi please", 6, 0.0, cwd=CWD)),
        ("pi-0.13.2.jsonl", Summary("", "remember kiwi please", 6, 0.0, cwd=CWD)),
    ],
)
def test_a_session_file_the_agent_wrote_is_summarized(fixture: str, expected: Summary) -> None:
    assert read_summary(FIXTURES / fixture) == expected


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([], Summary(), id="empty"),
        pytest.param(
            [b"{not json", b"", b"[1, 2]", b'"text"', b"null", USER, b'{"type": "mess'],
            Summary(first_prompt="remember kiwi", messages=1),
            id="malformed and cut lines are skipped",
        ),
        pytest.param(
            [line({"type": "session_info", "name": "old"}), USER, NAMED],
            Summary("Fruit talk", "remember kiwi", 1),
            id="the last name wins, on one line",
        ),
        pytest.param(
            [line({"type": "session", "cwd": "/w/a"}), line({"type": "session", "cwd": "/w/b"})],
            Summary(cwd="/w/a"),
            id="the header's cwd",
        ),
        pytest.param(
            [message("user", "  a plain string  "), USER],
            Summary(first_prompt="a plain string", messages=2),
            id="string content; the first prompt stays the first",
        ),
        pytest.param(
            [message("user", [{"type": "image", "data": "iVBOR", "mimeType": "image/png"}])],
            Summary(first_prompt="(a picture)", messages=1),
            id="a picture alone",
        ),
        pytest.param(
            [message("system", "You are pi"), USER, message("user", "later")],
            Summary(first_prompt="remember kiwi", messages=2),
            id="the system prompt is no message of the conversation",
        ),
        pytest.param(
            [spent(0.25), spent(1), spent(True), spent(-3), spent("2"), spent(None)],
            Summary(messages=6, cost=1.25),
            id="costs add up; nonsense costs are ignored",
        ),
        pytest.param(
            [message("assistant", "ok"), line({"type": "message", "message": "x"})],
            Summary(messages=1),
            id="no cost reported is no cost known",
        ),
        pytest.param(
            [USER, HUGE_RESULT, b'{"type":"message","x":"' + b"y" * MAX_LINE],
            Summary(first_prompt="remember kiwi", messages=2),
            id="a huge line is classified from its start, not parsed",
        ),
        pytest.param(
            [b"z" * (MAX_LINE + 1), b'{"type":"model_change",' + b" " * MAX_LINE],
            Summary(),
            id="a huge line of no known shape is skipped",
        ),
    ],
)
def test_summarize(lines: list[bytes], expected: Summary) -> None:
    assert summarize(lines) == expected


def test_a_file_over_the_budget_is_read_at_its_head_and_tail_only(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = message("toolResult", "x" * 100_000)  # parsed: under MAX_LINE
    count = SCAN_BYTES // len(filler) * 2  # twice the budget
    path.write_bytes(b"\n".join([USER, *[filler] * count, NAMED]) + b"\n")
    summary = read_summary(path)
    assert summary is not None
    assert (summary.name, summary.first_prompt, summary.complete) == (
        "Fruit talk",
        "remember kiwi",
        False,
    )
    # A lower bound: no more lines were read than fit in the budget.
    assert 1 < summary.messages <= SCAN_BYTES // len(filler) + 1 < count


@pytest.mark.parametrize("kind", ["missing", "link", "fifo", "folder"])
def test_only_a_regular_file_is_read(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.jsonl"
    (tmp_path / "elsewhere.jsonl").write_bytes(USER)
    if kind == "link":
        path.symlink_to(tmp_path / "elsewhere.jsonl")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    assert read_summary(path) is None


def test_the_listing_is_the_newest_session_files_first(tmp_path: Path) -> None:
    for age, name in enumerate(["c.jsonl", "a.jsonl", "b.jsonl"]):
        path = tmp_path / name
        path.write_bytes(message("user", name) + b"\n")
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    (tmp_path / ".hidden.jsonl").write_bytes(USER)
    (tmp_path / "pi-session-x.html").write_bytes(b"<html>")
    (tmp_path / "folder.jsonl").mkdir()
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "a.jsonl")
    found = listing(tmp_path, 2)
    assert [(f.name, f.modified, f.summary.first_prompt) for f in found] == [
        ("c.jsonl", 1_000_000, "c.jsonl"),
        ("a.jsonl", 999_999, "a.jsonl"),
    ]
    assert listing(tmp_path / "missing", 24) == []


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("2026-11-25T17-24-23-833Z_01a213bc.jsonl", True),
        ("missing.jsonl", False),
        ("link.jsonl", False),
        ("folder.jsonl", False),
        ("../outside.jsonl", False),
        ("sub/inner.jsonl", False),
        (".jsonl", False),
        ("notes.txt", False),
    ],
)
def test_a_picked_name_is_a_session_file_directly_inside_the_folder(
    tmp_path: Path, name: str, found: bool
) -> None:
    folder = tmp_path / "sessions"
    (folder / "sub").mkdir(parents=True)
    (folder / "folder.jsonl").mkdir()
    for inside in ("2026-11-25T17-24-23-833Z_01a213bc.jsonl", "sub/inner.jsonl", "notes.txt"):
        (folder / inside).write_bytes(USER)
    (tmp_path / "outside.jsonl").write_bytes(USER)
    (folder / "link.jsonl").symlink_to(tmp_path / "outside.jsonl")
    expected = folder.resolve() / name if found else None
    assert session_file(folder, name) == expected


@pytest.mark.parametrize(
    ("now", "name"),
    [
        (0.0, "1970-01-01T00-00-00-000Z_u.jsonl"),
        (1795627463.833, "2026-11-25T17-24-23-833Z_u.jsonl"),
        (1795627463.9996, "2026-11-25T17-24-24-000Z_u.jsonl"),
    ],
)
def test_a_new_session_file_is_named_as_pi_names_them(now: float, name: str) -> None:
    assert new_session_name(now, "u") == name


def test_a_new_session_name_is_one_the_listing_and_a_press_accept(tmp_path: Path) -> None:
    name = new_session_name(1795627463.833)
    (tmp_path / name).write_bytes(USER)
    assert session_file(tmp_path, name) == tmp_path.resolve() / name
    assert [f.name for f in listing(tmp_path, 24)] == [name]

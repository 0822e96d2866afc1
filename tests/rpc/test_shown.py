"""What a run has shown, folded (bridge/rpc/shown.py): the folding rules, the store's text,
and the property a take-back relies on: for every recorded transcript, replaying its
first records folded and then the rest as they came leaves the renderer's chat exactly
as replaying every record does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from bridge.rpc.shown import Shown, Snapshot, kind
from tests.render.test_renderer import (
    PROFILES,
    REPLAYED,
    Session,
    exit_code,
    needs_transcripts,
)
from tests.render.test_renderer import _id as transcript_id

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.rpc.agent_event import AgentEvent


def rec(**fields: Any) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


def delta(text: str, index: int | None = 0, kind: str = "text_delta") -> bytes:
    """As 0.87.1 and 1.x write it (the fold reads these without parsing them)."""
    step: dict[str, Any] = {"type": kind}
    if index is not None:
        step["contentIndex"] = index
    step["delta"] = text
    return rec(type="message_update", usage={"input": 1}, assistantMessageEvent=step)


def delta_other_order(text: str) -> bytes:
    """The same fields in another order: parsed whole."""
    step = {"delta": text, "type": "text_delta", "contentIndex": 0}
    return rec(type="message_update", assistantMessageEvent=step, usage={"input": 1})


def whole(text: str) -> bytes:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    step = {"type": "text_delta", "delta": text[-1:]}
    return rec(type="message_update", assistantMessageEvent=step, message=message)


def tool(kind: str, call: str, output: str = "") -> bytes:
    fields: dict[str, Any] = {"type": f"tool_execution_{kind}", "toolCallId": call}
    if kind == "update":
        fields["partialResult"] = {"content": [{"type": "text", "text": output}]}
    return rec(**fields)


START = rec(type="message_start", message={"role": "assistant", "content": []})
END = rec(type="message_end", message={"role": "assistant", "content": []})
THINK = delta("hmm", 0, "thinking_delta")


def folded(*records: bytes) -> list[bytes]:
    shown = Shown()
    for seq, record in enumerate(records, 1):
        shown.add(seq, record)
    return [data for _, data in shown.records()]


def deltas_of(records: list[bytes]) -> list[str | None]:
    return [json.loads(r).get("assistantMessageEvent", {}).get("delta") for r in records]


@pytest.mark.parametrize(
    ("records", "kept"),
    [
        # Deltas of one block in a row become one, with the text joined.
        ([START, delta("a"), delta("b"), delta("c"), END], [START, delta("abc"), END]),
        # Quotes, backslashes and escapes in the deltas come through as they were.
        (
            [START, delta('a"b'), delta("c\\d\u2028"), delta("é\n")],
            [START, delta('a"bc\\d\u2028é\n'), ],
        ),
        # Fields in another order, or a message before the step: read by parsing.
        (
            [START, delta("a"), delta_other_order("b"), delta("c")],
            [START, delta("abc")],
        ),
        # A thinking delta inside the message goes; the text around it still joins.
        ([START, delta("a"), THINK, delta("b"), END], [START, delta("ab"), END]),
        # Another block's deltas do not join this one's.
        (
            [START, delta("a"), delta("b", 2), delta("c")],
            [START, delta("a"), delta("b", 2), delta("c")],
        ),
        # Deltas without a contentIndex join each other.
        ([START, delta("a", None), delta("b", None)], [START, delta("ab", None)]),
        # An update outside any message is kept, whatever it is.
        ([THINK, delta("a")], [THINK, delta("a")]),
        # 0.73.1's whole-message updates in a row: the last one.
        ([START, whole("a"), whole("ab"), whole("abc"), END], [START, whole("abc"), END]),
        # A tool's updates: its last one, in the place of its first.
        (
            [tool("start", "t1"), tool("update", "t1", "1"), tool("start", "t2"),
             tool("update", "t1", "12")],
            [tool("start", "t1"), tool("update", "t1", "12"), tool("start", "t2")],
        ),
        # ...and none once it has ended; another tool's are kept.
        (
            [tool("start", "t1"), tool("update", "t1", "1"), tool("update", "t2", "x"),
             tool("end", "t1")],
            [tool("start", "t1"), tool("update", "t2", "x"), tool("end", "t1")],
        ),
        # What does not parse is kept as it came.
        ([START, b'{"type":"message_update",', END], [START, b'{"type":"message_update",', END]),
    ],
)  # fmt: skip
def test_records_fold_as_the_renderer_needs_them(records: list[bytes], kept: list[bytes]) -> None:
    got = folded(*records)
    assert [json.loads(r) if r.endswith(b"}") else r for r in got] == [
        json.loads(r) if r.endswith(b"}") else r for r in kept
    ]


def test_a_merged_entry_keeps_the_seq_of_its_last_record_and_forget_drops_through() -> None:
    shown = Shown()
    for seq, record in enumerate([START, delta("a"), delta("b"), END, START, delta("c")], 1):
        shown.add(seq, record)
    assert [seq for seq, _ in shown.records()] == [1, 3, 4, 5, 6]
    assert [seq for seq, _ in shown.records(after=4)] == [5, 6]
    shown.forget(4)
    assert [seq for seq, _ in shown.records()] == [5, 6]
    shown.add(7, delta("d"))
    assert deltas_of([r for _, r in shown.records()]) == [None, "cd"]


def test_a_snapshot_round_trips_and_gives_its_entries_past_applied() -> None:
    records = [(3, START), (9, delta("héllo\u2028x")), (10, END)]
    snapshot = Snapshot(pid=41, started=7, through=12, records=records)
    back = Snapshot.decode(snapshot.encode())
    assert back == snapshot
    assert back is not None
    assert back.after(3) == records[1:]
    assert back.after(12) == []


@pytest.mark.parametrize(
    "text", ["", "shown 2 1 2 3", "shown 1 1 2", "shown 1 a 2 3", "shown 1 1 2 3\nx {}", "junk"]
)
def test_text_that_is_not_a_snapshot_is_none(text: str) -> None:
    assert Snapshot.decode(text) is None


# --- the property a take-back relies on ---------------------------------------------------


def lines_of(path: Path) -> list[bytes]:
    lines = path.read_bytes().split(b"\n")  # LF only: the text holds raw U+2028
    return [line.removesuffix(b"\r") for line in lines if line.strip()]


def events(path: Path, lines: list[bytes]) -> list[AgentEvent]:
    from bridge.rpc.decode import decode_record
    from bridge.rpc.events import AutoRetryStart, Response
    from bridge.rpc.signals import AgentGone, RunEnded, RunStarted
    from bridge.rpc.state import Phase, RunChange, RunState

    state = RunState(profile=PROFILES[path.parent.name])
    out: list[AgentEvent] = []
    for line in lines:
        record = decode_record(line)
        retry = isinstance(record, AutoRetryStart)
        if state.phase is Phase.SETTLING and not retry and state.settle() is RunChange.ENDED:
            out.append(RunEnded())
        if isinstance(record, Response):
            continue
        change = state.apply(record, 0.0)
        if change is RunChange.STARTED:
            out.append(RunStarted())
        out.append(record)
        if change is RunChange.ENDED:
            out.append(RunEnded())
    if state.settle() is RunChange.ENDED or state.agent_exited() is RunChange.ENDED:
        out.append(RunEnded())
    out.append(AgentGone(exit_code(path), ""))
    return out


def chat_after(path: Path, lines: list[bytes]) -> tuple[object, ...]:
    """What the chat shows once every event is in (a clock that stands still: the
    durations shown do not depend on how many records there were)."""
    session = Session()
    for item in events(path, lines):
        session.feed(item, step=0.0)
    session.tick(60)
    chat = session.chat
    shown = {slot: (m.text, m.buttons) for slot, m in chat.messages.items()}
    uploads = {slot: (u.filename, u.data) for slot, u in chat.uploads.items()}
    return shown, chat.order, uploads


@needs_transcripts
@pytest.mark.parametrize("path", REPLAYED, ids=transcript_id)
def test_a_transcript_folded_up_to_any_point_shows_what_it_shows_whole(path: Path) -> None:
    lines = lines_of(path)
    whole_chat = chat_after(path, lines)
    # Cut points: the start, each quarter, every run's end, the end.
    cuts = {0, len(lines)} | {len(lines) * q // 4 for q in (1, 2, 3)}
    cuts |= {n + 1 for n, line in enumerate(lines) if line.startswith(b'{"type":"agent_end"')}
    for cut in sorted(cuts):
        shown = Shown()
        for seq, line in enumerate(lines[:cut], 1):
            shown.add(seq, line)
        head = [data for _, data in shown.records()]
        assert chat_after(path, head + lines[cut:]) == whole_chat, f"cut after {cut}"


@needs_transcripts
def test_the_transcripts_updates_fold_to_a_fraction() -> None:
    """The property above would hold of a fold that kept everything: it must not."""
    updates = (b"message_update", b"tool_execution_update")
    whole = kept = 0
    for path in REPLAYED:
        lines = lines_of(path)
        shown = Shown()
        for seq, line in enumerate(lines, 1):
            shown.add(seq, line)
        whole += len([line for line in lines if kind(line) in updates])
        kept += len([data for _, data in shown.records() if kind(data) in updates])
    assert kept < whole / 4, (kept, whole)

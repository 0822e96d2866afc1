"""`LineSplitter` turns the agent's stdout bytes into records, however the bytes arrive.

Records end at LF only, one trailing CR is stripped, blank lines are skipped, a
record over the cap becomes an `OversizedRecord` and the stream goes on, and a
last record without its LF comes out of `close()`. Pure calls, no processes.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.rpc.content import text_of
from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.events import AgentStart, MessageUpdate, ToolExecutionUpdate, TurnStart
from bridge.rpc.framing import DEFAULT_MAX_RECORD, Frame, LineSplitter, OversizedRecord

KIB = 1024
MB = 1_000_000

# Generated streams are small; a loaded CI machine must not turn them into flakes.
PROPERTIES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split(stream: bytes, cuts: list[int], max_record: int = DEFAULT_MAX_RECORD) -> list[Frame]:
    """Feed `stream` cut at the given offsets, then close: every frame, in order."""
    splitter = LineSplitter(max_record)
    points = sorted({0, len(stream), *(c for c in cuts if 0 < c < len(stream))})
    frames: list[Frame] = []
    for start, end in itertools.pairwise(points):
        frames += splitter.feed(stream[start:end])
    return frames + splitter.close()


def in_chunks(stream: bytes, size: int, max_record: int = DEFAULT_MAX_RECORD) -> list[Frame]:
    return split(stream, list(range(size, len(stream), size)), max_record)


def every_cut(stream: bytes) -> list[list[int]]:
    """Every way of cutting `stream` once, plus one byte at a time."""
    return [[cut] for cut in range(len(stream) + 1)] + [list(range(len(stream)))]


def record(text: str, kind: str = "message_update") -> bytes:
    """A record as the agents write it: compact JSON, non-ASCII raw (U+2028 too)."""
    obj = {"type": kind, "assistantMessageEvent": {"type": "text_delta", "delta": text}}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


# --- any cut, any content --------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=40)
terminators = st.sampled_from([b"\n", b"\r\n"])
blank_lines = st.sampled_from([b"\n", b"\r\n", b"   \n", b"\t\r\n"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A stream of records with LF or CRLF ends and blank lines between them, and the
    records it holds; the last record may lack its LF."""
    records = [record(t) for t in draw(st.lists(texts, max_size=8))]
    parts: list[bytes] = []
    for rec in records:
        parts += draw(st.lists(blank_lines, max_size=2))
        parts += [rec, draw(terminators)]
    ends_at_eof: bool = draw(st.booleans())
    if records and ends_at_eof:
        parts.pop()  # the last record ends at EOF, not at an LF
    return b"".join(parts), records


@PROPERTIES
@given(streams(), st.lists(st.integers(min_value=0, max_value=2000), max_size=30))
def test_records_come_out_whole_wherever_the_stream_is_cut(
    stream_and_records: tuple[bytes, list[bytes]], cuts: list[int]
) -> None:
    stream, records = stream_and_records
    assert split(stream, cuts) == records


@PROPERTIES
@given(streams(), st.integers(min_value=1, max_value=64))
def test_feeding_one_byte_or_many_at_a_time_gives_the_same_records(
    stream_and_records: tuple[bytes, list[bytes]], size: int
) -> None:
    stream, records = stream_and_records
    assert in_chunks(stream, 1) == in_chunks(stream, size) == split(stream, []) == records


@PROPERTIES
@given(st.binary(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=20))
def test_arbitrary_bytes_frame_the_same_wherever_they_are_cut(
    stream: bytes, cuts: list[int]
) -> None:
    # The reference: split on LF only, strip one CR, drop what bytes.strip() empties.
    pieces = [p[:-1] if p.endswith(b"\r") else p for p in stream.split(b"\n")]
    assert split(stream, cuts) == [p for p in pieces if p.strip()]


# --- bytes that other splitters get wrong ------------------------------------------------


@pytest.mark.parametrize(
    "char",
    ["é", "€", "😀", "\u2028", "\u2029", "\U0010ffff"],
    ids=["2-byte", "3-byte", "4-byte", "U+2028", "U+2029", "U+10FFFF"],
)
def test_a_record_split_inside_a_utf8_char_is_rebuilt(char: str) -> None:
    rec = record(f"a{char}b{char}")
    stream = rec + b"\n"
    for cuts in every_cut(stream):
        assert split(stream, cuts) == [rec], cuts
    decoded = decode_record(rec)
    assert isinstance(decoded, MessageUpdate)
    assert decoded.assistantMessageEvent.delta == f"a{char}b{char}"


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        (b'{"type":"agent_start"}\r\n', b'{"type":"agent_start"}'),
        (b'{"type":"agent_start"}\r\r\n', b'{"type":"agent_start"}\r'),
        (b'{"type":"agent_start"}\n', b'{"type":"agent_start"}'),
        (b'{"a":"x\ry"}\r\n', b'{"a":"x\ry"}'),
    ],
    ids=["crlf", "only-one-cr-stripped", "lf", "cr-inside-kept"],
)
def test_one_trailing_cr_is_stripped_wherever_the_cut_falls(stream: bytes, expected: bytes) -> None:
    for cuts in every_cut(stream):
        assert split(stream, cuts) == [expected], cuts


@pytest.mark.parametrize(
    "separator",
    ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c"],
    ids=["U+2028", "U+2029", "NEL", "FS", "GS", "RS", "VT", "FF"],
)
def test_a_raw_separator_inside_a_json_string_does_not_split_the_record(separator: str) -> None:
    # str.splitlines() splits on every one of these; the agents write them raw.
    rec = record(f"before{separator}after")
    stream = record("first") + b"\n" + rec + b"\n" + record("last") + b"\n"
    assert split(stream, []) == [record("first"), rec, record("last")]
    decoded = decode_record(rec)
    assert isinstance(decoded, MessageUpdate)
    assert decoded.assistantMessageEvent.delta == f"before{separator}after"


@pytest.mark.parametrize(
    "blank",
    [b"\n", b"\r\n", b"  \n", b"\t\n", b" \t \r\n", b"\n\n\n"],
    ids=["lf", "crlf", "spaces", "tab", "mixed", "several"],
)
def test_blank_lines_between_records_are_skipped(blank: bytes) -> None:
    stream = blank + b'{"type":"agent_start"}\n' + blank + b'{"type":"turn_start"}\n' + blank
    for cuts in every_cut(stream):
        assert split(stream, cuts) == [b'{"type":"agent_start"}', b'{"type":"turn_start"}']


# --- the cap ---------------------------------------------------------------------------

CAP = 64


@pytest.mark.parametrize("chunk", [1, 3, 16, 63, 64, 65, 200, 10_000], ids=lambda n: f"chunk{n}")
@pytest.mark.parametrize("size", [CAP + 1, 100, 1000], ids=lambda n: f"record{n}")
def test_a_record_over_the_cap_is_skipped_and_the_next_record_still_arrives(
    chunk: int, size: int
) -> None:
    big = b'{"x":"' + b"y" * (size - 8) + b'"}'
    assert len(big) == size
    stream = b'{"type":"agent_start"}\n' + big + b'\n{"type":"turn_start"}\n'
    assert in_chunks(stream, chunk, CAP) == [
        b'{"type":"agent_start"}',
        OversizedRecord(size=size, limit=CAP),
        b'{"type":"turn_start"}',
    ]


@pytest.mark.parametrize("chunk", [1, 7, 64, 4 * KIB], ids=lambda n: f"chunk{n}")
def test_a_record_of_exactly_the_cap_is_kept(chunk: int) -> None:
    exact = b'{"x":"' + b"y" * (CAP - 8) + b'"}'
    assert len(exact) == CAP
    assert in_chunks(exact + b"\n" + exact + b"\n", chunk, CAP) == [exact, exact]


@pytest.mark.parametrize("chunk", [1, 1000, 64 * KIB], ids=lambda n: f"chunk{n}")
def test_an_oversized_record_cut_off_by_eof_is_reported_by_close(chunk: int) -> None:
    assert in_chunks(b"z" * 100_000, chunk, 64 * KIB) == [OversizedRecord(100_000, 64 * KIB)]


def test_whether_a_crlf_record_at_the_cap_is_kept_does_not_depend_on_the_chunks() -> None:
    # CAP bytes of content plus CRLF: kept when the LF comes in the same chunk, dropped
    # as OversizedRecord(CAP + 1) when the CR is buffered before its LF arrives. For the
    # same reason a record skipped while streaming reports its size with the CR.
    exact = b'{"x":"' + b"y" * (CAP - 8) + b'"}'
    stream = exact + b"\r\n"
    assert split(stream, [], CAP) == [exact]
    assert split(stream, [len(stream) - 1], CAP) == [exact]


def test_a_cap_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError, match="max_record"):
        LineSplitter(0)


# --- bad records, EOF, giant records -------------------------------------------------------


def test_garbage_between_records_becomes_malformed_values_and_the_stream_goes_on() -> None:
    stream = (
        b'{"type":"agent_start"}\n'
        b"this is not json\n"
        b"[1,2,3]\n"
        b'{"type":"turn_start"}\n'
        b'{"type":"agent_st\n'  # a record cut short by a crashing writer
        b'"just a string"\n'
        b'{"no":"type"}\n'
        b"\xff\xfe\n"
        b'{"type":"agent_start"}\n'
    )
    for chunk in (1, 5, len(stream)):
        decoded = [decode_record(f) for f in in_chunks(stream, chunk) if isinstance(f, bytes)]
        kinds = [type(d) for d in decoded]
        assert kinds == [
            AgentStart,
            MalformedRecord,
            MalformedRecord,
            TurnStart,
            MalformedRecord,
            MalformedRecord,
            MalformedRecord,
            MalformedRecord,
            AgentStart,
        ]
        reasons = [d.reason for d in decoded if isinstance(d, MalformedRecord)]
        assert reasons[0].startswith("not JSON")
        assert reasons[1] == "not a JSON object but list"
        assert reasons[3] == "not a JSON object but str"
        assert reasons[4] == "no string 'type' field"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b'{"type":"agent_start"}', [b'{"type":"agent_start"}']),
        (b'{"type":"agent_start"}\r', [b'{"type":"agent_start"}']),
        (b"   ", []),
        (b"\r", []),
        (b"", []),
    ],
    ids=["record", "record-cr", "spaces", "cr", "nothing"],
)
def test_a_last_record_without_its_lf_comes_out_of_close(
    tail: bytes, expected: list[bytes]
) -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"type":"turn_start"}\n' + tail) == [b'{"type":"turn_start"}']
    assert splitter.close() == expected
    assert splitter.close() == []


def test_after_close_the_splitter_starts_afresh() -> None:
    splitter = LineSplitter(CAP)
    splitter.feed(b"x" * (CAP + 1))
    assert splitter.close() == [OversizedRecord(CAP + 1, CAP)]
    assert splitter.feed(b'{"type":"agent_start"}\n') == [b'{"type":"agent_start"}']


GIANT_TEXT = 20 * MB


@pytest.fixture(scope="module")
def giant() -> bytes:
    """A 20 MB tool_execution_update, the size of a huge tool output."""
    head = b'{"type":"tool_execution_update","toolCallId":"t1","toolName":"bash",'
    body = b'"partialResult":{"content":[{"type":"text","text":"' + b"x" * GIANT_TEXT
    return head + body + b'"}]}}'


@pytest.mark.parametrize("chunk", [None, 64 * KIB], ids=["one-chunk", "64KiB-chunks"])
def test_a_20_mb_record_comes_out_as_one_intact_record(giant: bytes, chunk: int | None) -> None:
    stream = giant + b"\n"
    splitter = LineSplitter()
    if chunk is None:
        frames = splitter.feed(stream)
    else:
        frames = []
        for start in range(0, len(stream), chunk):
            out = splitter.feed(stream[start : start + chunk])
            assert out == [] or start + chunk >= len(stream)
            frames += out
    assert splitter.close() == []
    assert len(frames) == 1
    assert frames[0] == giant
    decoded = decode_record(frames[0])
    assert isinstance(decoded, ToolExecutionUpdate)
    assert decoded.partialResult is not None
    assert text_of(decoded.partialResult.content) == "x" * GIANT_TEXT

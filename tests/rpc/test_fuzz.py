"""Fuzzing the agent's side of the RPC layer: any output frames and decodes to a value.

`LineSplitter` and `decode_record` sit between the agent's stdout and the reader
task; an exception out of either would end the reader and with it the
conversation's agent. Their contract (bridge/rpc/framing.py, decode.py): records
end at LF only, wherever the chunks are cut, U+2028 and friends inside strings
are content, a record over the cap is reported as an `OversizedRecord`; every
record decodes to a typed event, an `UnknownEvent` (a type this bridge does not
know, every field kept), an `OtherUIRequest` or a `MalformedRecord`, and never
raises. The seeds are real records of every known type and UI method (copied
from the transcripts in ../shared/protocol, the few types no transcript holds
written from bridge/rpc/events.py); the fuzz mutates their fields, invents
types, and mixes in bytes that are not JSON, JSON that is not an object, nesting
past Python's recursion limit, records around the size cap and huge strings.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from hypothesis import example, given
from hypothesis import strategies as st

from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.events import KNOWN_TYPES, MessageUpdate, UnknownEvent
from bridge.rpc.framing import Frame, LineSplitter, OversizedRecord
from bridge.rpc.ui import KnownUIRequest, OtherUIRequest
from bridge.rpc.wire import Wire
from tests.support.fuzzing import FUZZ, JSON, TEXT, deep_json, mutated, ran

SEED_LINES = [
    # atomic, e0871, v0731 and o0132 transcripts
    '{"type":"agent_start"}',
    '{"type":"agent_settled"}',
    '{"type":"turn_start"}',
    '{"type":"agent_end","messages":[{"role":"assistant","content":[],"api":"openai-completions"'
    ',"provider":"fake","model":"fake-model","usage":{"input":0,"output":0,"cacheRead":0,'
    '"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,'
    '"total":0}},"stopReason":"error","timestamp":1795345621106,"errorMessage":"500 fake '
    'internal server error (overloaded)"}]}',
    '{"type":"turn_end","message":{"role":"assistant","content":[{"type":"text","text":"Hello"}]'
    ',"stopReason":"stop","timestamp":1795345243832},"toolResults":[]}',
    '{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"IDLE '
    'STEER"}],"timestamp":1795346467812}}',
    '{"type":"message_end","message":{"role":"toolResult","toolCallId":"call_6d00b665b0",'
    '"toolName":"bash","content":[{"type":"text","text":"total 8\\n"}],"isError":false,'
    '"timestamp":1795344841918}}',
    '{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,'
    '"delta":"Hello ","partial":{"role":"assistant","content":[{"type":"text","text":"Hello "}],'
    '"stopReason":"stop","timestamp":1795344839356}},"message":{"role":"assistant","content":'
    '[{"type":"text","text":"Hello "}],"stopReason":"stop","timestamp":1795344839356}}',
    '{"type":"message_update","usage":{"input":788,"output":15},"assistantMessageEvent":{"type":'
    '"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"call_76e587e152",'
    '"name":"bash","arguments":{"command":"ls -la"}}}}',
    '{"type":"tool_execution_start","toolCallId":"call_ea94ed55dd","toolName":"bash","args":'
    '{"command":"ls -la"}}',
    '{"type":"tool_execution_update","toolCallId":"call_76e587e152","toolName":"bash","args":'
    '{"command":"ls -la"},"partialResult":{"content":[]}}',
    '{"type":"tool_execution_end","toolCallId":"call_2e71a4d7af","toolName":"bash","result":'
    '{"content":[{"type":"text","text":"(no output)"}]},"isError":false}',
    '{"type":"bash_execution_update","id":"bash-14","delta":"hi-from-rpc-bash\\n"}',
    '{"type":"queue_update","steering":[],"followUp":[]}',
    '{"type":"compaction_start","reason":"manual"}',
    '{"type":"compaction_end","reason":"manual","aborted":false,"willRetry":false,'
    '"errorMessage":"Compaction failed: Nothing to compact (session too small)"}',
    '{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":'
    '"500 fake internal server error (overloaded)"}',
    '{"type":"auto_retry_end","success":true,"attempt":1}',
    '{"type":"session_info_changed","name":"bridge-test"}',
    '{"type":"entry_appended","entry":{"type":"context_edit","id":"2fb8bff0","parentId":'
    '"aeeb8aac","timestamp":"2026-11-22T11:02:26.619Z","targetId":"aeeb8aac","replacement":null}}',
    '{"type":"error","error":"Cannot read properties of null (reading \'type\')"}',
    '{"id":"bash-30","type":"response","command":"bash","success":true,"data":{"output":'
    '"hi-from-rpc-bash\\n","exitCode":0,"cancelled":false,"truncated":false}}',
    '{"type":"response","command":"bogus_command","success":false,"error":"Unknown command: '
    'bogus_command"}',
    '{"type":"extension_ui_request","id":"59f59495","method":"select","title":"Pick (times '
    'out)","options":["A","B"],"timeout":1500}',
    '{"type":"extension_ui_request","id":"19c840d1","method":"confirm","title":"Proceed?",'
    '"message":"Confirm message body"}',
    '{"type":"extension_ui_request","id":"e532d14d","method":"input","title":"Your name?",'
    '"placeholder":"placeholder..."}',
    '{"type":"extension_ui_request","id":"e14f9f2c","method":"editor","title":"Edit text",'
    '"prefill":"prefill\\nline2"}',
    '{"type":"extension_ui_request","id":"fb38299c","method":"notify","message":"confirm'
    '(timeout) -> false"}',
    '{"type":"extension_ui_request","id":"fa184ece","method":"setStatus","statusKey":"mcp"}',
    '{"type":"extension_ui_request","id":"fe9dd0f4","method":"setWidget","widgetKey":"probe"}',
    '{"type":"extension_ui_request","id":"1dedd786","method":"setTitle","title":"probe title"}',
    '{"type":"extension_ui_request","id":"d4afa023","method":"set_editor_text","text":'
    '"prefilled by probe"}',
    # no transcript holds these: written from bridge/rpc/events.py and the protocol notes
    '{"type":"auto_compaction_start","reason":"threshold"}',
    '{"type":"auto_compaction_end","reason":"threshold","result":{"summary":"s"},"aborted":false,'
    '"willRetry":false}',
    '{"type":"compaction","summary":"Earlier: the build","tokensBefore":120000,"auto":true}',
    '{"type":"extension_error","extensionPath":"/srv/lab/extensions/x.ts","event":"tool_call",'
    '"error":"boom"}',
    '{"type":"thinking_level_changed","level":"high"}',
]
SEEDS: list[dict[str, Any]] = [json.loads(line) for line in SEED_LINES]
UI_METHODS = {
    get_args(model.model_fields["method"].annotation)[0]
    for model in get_args(get_args(KnownUIRequest)[0])
}
DECODED = (Wire, MalformedRecord, OversizedRecord)  # every event and UI request is a Wire


def decodes(record: bytes) -> Any:
    """`decode_record`, and what its answer promises whatever the record held."""
    decoded = decode_record(record)
    assert isinstance(decoded, DECODED), decoded
    if isinstance(decoded, UnknownEvent):
        assert decoded.type not in KNOWN_TYPES, decoded
    return decoded


def test_the_seeds_are_one_real_record_of_every_known_type_and_ui_method() -> None:
    assert {seed["type"] for seed in SEEDS} == KNOWN_TYPES
    assert {seed["method"] for seed in SEEDS if "method" in seed} == UI_METHODS
    for seed, line in zip(SEEDS, SEED_LINES, strict=True):
        decoded = decode_record(line.encode())
        assert not isinstance(decoded, MalformedRecord | UnknownEvent | OtherUIRequest), decoded
        assert getattr(decoded, "type", None) == seed["type"]


def dumped(record: Any) -> bytes:
    """As a JavaScript agent writes it: UTF-8, non-ASCII raw (U+2028 too), on one line."""
    return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass")


@FUZZ
@given(st.sampled_from(SEEDS).flatmap(mutated))
@example({"type": "extension_ui_request", "id": "d1", "method": None})
@example({"type": "response", "success": float("inf"), "id": 2**64})
def test_a_known_record_with_mutated_fields_decodes_to_a_value(record: dict[str, Any]) -> None:
    ran("rpc: mutated known records")
    decoded = decodes(dumped(record))
    kind = record.get("type")
    if isinstance(kind, str) and kind in KNOWN_TYPES:
        assert not isinstance(decoded, UnknownEvent), decoded
    if isinstance(decoded, Wire) and not isinstance(decoded, OtherUIRequest):
        assert getattr(decoded, "type", None) == kind


UNKNOWN_TYPES = TEXT.filter(lambda kind: kind not in KNOWN_TYPES)


@FUZZ
@given(UNKNOWN_TYPES, st.dictionaries(TEXT.filter(lambda key: key != "type"), JSON, max_size=5))
def test_an_event_of_an_unknown_type_is_kept_with_every_field(
    kind: str, fields: dict[str, Any]
) -> None:
    ran("rpc: unknown types")
    record = {"type": kind, **fields}
    decoded = decodes(dumped(record))
    assert isinstance(decoded, UnknownEvent), decoded
    # json.dumps both sides: NaN is not equal to itself, but prints the same
    assert json.dumps(decoded.model_dump(), sort_keys=True) == json.dumps(record, sort_keys=True)


@st.composite
def not_records(draw: st.DrawFn) -> bytes:
    """Bytes a broken agent (or a library printing to stdout) might write on a line."""
    kind = draw(st.sampled_from(["bytes", "json", "deep", "text", "truncated"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":  # JSON, but not an object with a string type
        return dumped(draw(JSON))
    if kind == "deep":
        kind = draw(st.sampled_from(["agent_start", "x"]))
        return f'{{"type":"{kind}","x":{draw(deep_json())}}}'.encode()
    if kind == "text":
        return draw(TEXT).encode("utf-8")
    line = dumped(draw(st.sampled_from(SEEDS)))
    return line[: draw(st.integers(0, len(line) - 1))]


@FUZZ
@given(not_records())
# Found by this suite: nesting past ~1,000 levels made the slow path's json.loads
# raise RecursionError out of decode_record (pydantic-core gives up at 255 levels).
@example(b"[" * 1_500 + b"]" * 1_500)
@example(b'{"type":"agent_start","x":' + b"[" * 5_000 + b"]" * 5_000 + b"}")
@example(b"\xef\xbb\xbf" + SEED_LINES[0].encode())  # a UTF-8 byte order mark
@example(SEED_LINES[0].encode("utf-16"))
@example(b'{"type":"response","id":"\\ud800"}')  # a lone surrogate, escaped
def test_a_line_that_is_not_a_record_decodes_to_a_problem_value(line: bytes) -> None:
    ran("rpc: not records")
    decodes(line)


LIMIT = 512  # a small cap, so records around it are cheap to build


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["record", "record", "junk", "blank", "capped"]))
    if kind == "record":
        line = dumped(draw(st.sampled_from(SEEDS).flatmap(mutated)))
    elif kind == "junk":
        line = draw(st.binary(max_size=80))
    elif kind == "blank":
        line = draw(st.sampled_from([b"", b" ", b"\t", b"\r", b" \r", b"\x0b\x0c"]))
    else:  # a record right around the cap, or far past it
        size = draw(st.sampled_from([LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2, 5 * LIMIT]))
        head = b'{"type":"message_update","x":"'
        line = head + b"y" * max(0, size - len(head) - 2) + b'"}'
    line = line.replace(b"\n", b"")
    return line + draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))


def expected_frames(stream: bytes, limit: int) -> list[Frame]:
    """What framing must find: the LF-separated records, one trailing CR dropped,
    blank ones skipped, those over the cap reported."""
    frames: list[Frame] = []
    for record in stream.split(b"\n"):
        record = record.removesuffix(b"\r")
        if len(record) > limit:
            frames.append(OversizedRecord(len(record), limit))
        elif record and not record.isspace():
            frames.append(record)
    return frames


def framed(stream: bytes, cuts: list[int], limit: int) -> list[Frame]:
    """`stream` through a `LineSplitter`, fed in chunks of the sizes `cuts` cycles through."""
    splitter, frames = LineSplitter(max_record=limit), []
    position, turn = 0, 0
    while position < len(stream):
        size = cuts[turn % len(cuts)]
        frames += splitter.feed(stream[position : position + size])
        position, turn = position + size, turn + 1
    return frames + splitter.close()


def same_frame(got: Frame, want: Frame) -> bool:
    if isinstance(want, OversizedRecord) and isinstance(got, OversizedRecord):
        # Known, reported, harmless: a record skipped across chunks counts the CR
        # before its LF in `size`, so the size may be one more than when it is whole.
        return got.limit == want.limit and want.size <= got.size <= want.size + 1
    return got == want


@FUZZ
@given(
    st.lists(lines(), max_size=8),
    st.booleans(),
    st.lists(st.integers(1, 2 * LIMIT), min_size=1, max_size=8),
)
def test_output_cut_into_chunks_anywhere_frames_and_decodes_as_it_would_whole(
    records: list[bytes], last_without_lf: bool, cuts: list[int]
) -> None:
    ran("rpc: framing + decoding of chunked output")
    stream = b"".join(records)
    if last_without_lf:  # the agent died mid-line: the last record still counts
        stream = stream.removesuffix(b"\n")
    frames, want = framed(stream, cuts, LIMIT), expected_frames(stream, LIMIT)
    assert len(frames) == len(want), (frames, want)
    assert all(map(same_frame, frames, want)), (frames, want)
    for frame in frames:
        if isinstance(frame, bytes):
            decodes(frame)


SEPARATED = st.lists(
    TEXT | st.sampled_from(["\u2028", "\u2029", "\x85", "\r", "\r\n", "\x0b\x0c", "\x1c"]),
    min_size=1,
    max_size=6,
).map("".join)


@FUZZ
@given(
    SEPARATED,
    st.sampled_from([0, 0, 0, 1_000_000]),  # now and then a delta of a megabyte
    st.lists(st.integers(1, 300), min_size=1, max_size=4),
)
def test_text_with_line_separators_arrives_whole_however_it_was_cut(
    text: str, size: int, cuts: list[int]
) -> None:
    """Only LF ends a record: U+2028, U+2029 and NEL, which JSON writes raw inside a
    string and `str.splitlines()` would split on, are the agent's text."""
    ran("rpc: line separators in strings")
    delta = text * max(1, size // max(1, len(text)))
    record: dict[str, Any] = {"type": "message_update"}
    record["assistantMessageEvent"] = {"type": "text_delta", "delta": delta}
    line = dumped(record) + b"\n"
    scale = max(1, len(line) // 1_000)  # at most a few thousand chunks
    frames = framed(line, [cut * scale for cut in cuts], len(line))
    assert len(frames) == 1, frames
    assert isinstance(frames[0], bytes), frames
    decoded = decodes(frames[0])
    assert isinstance(decoded, MessageUpdate), decoded
    assert decoded.assistantMessageEvent.delta == delta

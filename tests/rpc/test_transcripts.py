"""Every record the real agents wrote, and every line written to them, decodes.

The transcripts in ../shared/protocol/transcripts are the raw stdout and stdin bytes
of pi 0.73.1 (v0731), 0.87.1 (e0871), the atomic fork and the legacy 0.13.2 (o0132);
the project's own recordings of 1.5.2 (p152) are in tests/fixtures/transcripts.
Each stdout line must decode to a known type (`UnknownEvent` / `OtherUIRequest` only
for types the protocol documents never name), `LineSplitter` must frame each file the
same whatever chunks it arrives in, and each stdin line must be a command model that
`encode_command` writes back as the same JSON, except the bad input sent on purpose.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from typing import TYPE_CHECKING, Any, get_args

import pytest
from pydantic import ValidationError

from bridge.rpc.commands import Outgoing, encode_command
from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.events import KNOWN_TYPES, UnknownEvent
from bridge.rpc.framing import LineSplitter, OversizedRecord
from bridge.rpc.ui import OtherUIRequest
from tests.support.paths import PROTOCOL, TRANSCRIPTS, transcript_dir

if TYPE_CHECKING:
    from pathlib import Path

FOLDERS = ("atomic", "e0871", "o0132", "v0731", "p152")

if not TRANSCRIPTS.is_dir():
    pytest.skip(
        f"the recorded transcripts are not next to this checkout ({TRANSCRIPTS} is missing)",
        allow_module_level=True,
    )


def transcript_files(suffix: str) -> list[Path]:
    return sorted(p for folder in FOLDERS for p in transcript_dir(folder).glob(f"*{suffix}"))


def name_of(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def scenario_of(path: Path) -> str:
    return path.name.split(".", 1)[0]


STDOUT = transcript_files(".stdout.jsonl")
STDIN = transcript_files(".stdin.jsonl")


def documented_names() -> tuple[set[str], set[str]]:
    """Event types and UI methods named anywhere in the protocol documents."""
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in [*sorted((PROTOCOL / "seeds").glob("*.md")), PROTOCOL / "OBSERVED.md"]
        if p.is_file()
    )
    quoted = set(re.findall(r'"type"\s*:\s*"(\w+)"', text))
    ticked = set(re.findall(r"`(\w+)", text))
    methods = set(re.findall(r'"method"\s*:\s*"(\w+)"', text))
    return quoted | ticked, methods | ticked


DOCUMENTED_TYPES, DOCUMENTED_METHODS = documented_names()

# Lines of agent stdout that are not JSON at all, by transcript: none. Every agent
# wrote one JSON object per line, even when it crashed (j2_null wrote nothing).
NOT_JSON_STDOUT: dict[str, set[int]] = {}


def lines_of(data: bytes) -> list[bytes]:
    """The reference framing: split on LF, drop the empty piece after the last LF."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def test_every_agent_folder_has_recorded_transcripts() -> None:
    for folder in FOLDERS:
        assert list(transcript_dir(folder).glob("*.stdout.jsonl")), folder
        assert list(transcript_dir(folder).glob("*.stdin.jsonl")), folder


@pytest.mark.parametrize("path", STDOUT, ids=name_of)
def test_every_stdout_line_decodes_to_a_known_type(path: Path) -> None:
    lines = lines_of(path.read_bytes())
    malformed: set[int] = set()
    not_json: set[int] = set()
    for number, line in enumerate(lines):
        decoded = decode_record(line)
        try:
            raw: Any = json.loads(line)
        except ValueError:
            not_json.add(number)
            raw = None
        if isinstance(decoded, MalformedRecord):
            malformed.add(number)
            continue
        assert not isinstance(decoded, OversizedRecord)
        assert isinstance(raw, dict), number
        assert decoded.type == raw["type"], number
        if isinstance(decoded, OtherUIRequest):
            assert decoded.method not in DOCUMENTED_METHODS, (number, decoded.method)
        elif isinstance(decoded, UnknownEvent):
            assert decoded.type not in DOCUMENTED_TYPES, (number, decoded.type)
        else:
            assert decoded.type in KNOWN_TYPES, number
        if raw["type"] == "extension_ui_request":
            assert getattr(decoded, "method", None) == raw["method"], number
    assert not_json == NOT_JSON_STDOUT.get(name_of(path), set())
    assert malformed == not_json


def random_cuts(size: int, seed: int, largest: int) -> list[int]:
    rng = random.Random(seed)
    cuts, at = [], 0
    while at < size:
        at += rng.randint(1, largest)
        cuts.append(at)
    return cuts


@pytest.mark.parametrize("largest", [7, 300, 70_000], ids=lambda n: f"chunks-upto-{n}")
@pytest.mark.parametrize("path", STDOUT, ids=name_of)
def test_random_chunks_frame_a_transcript_like_splitting_on_lf(path: Path, largest: int) -> None:
    data = path.read_bytes()
    expected = [line for line in lines_of(data) if line]
    seed = zlib.crc32(name_of(path).encode()) + largest
    splitter = LineSplitter()
    frames: list[object] = []
    start = 0
    for cut in random_cuts(len(data), seed, largest):
        frames += splitter.feed(data[start:cut])
        start = cut
    frames += splitter.close()
    assert frames == expected


# --- stdin: what the recorder wrote to the agents ----------------------------------------


def command_models() -> dict[str, list[type[Outgoing]]]:
    """Command models by their `type`; `prompt` has two (images and legacy attachments)."""
    models: dict[str, list[type[Outgoing]]] = {}
    for model in get_args(Outgoing):
        models.setdefault(model.model_fields["type"].default, []).append(model)
    return models


COMMAND_MODELS = command_models()

# Bad input the recorder sent on purpose, by scenario: line (without the recorder's
# `, "id": "prompt-N"`, which differs per agent) → why it is no command.
DELIBERATELY_BAD: dict[str, dict[bytes, str]] = {
    "j_invalid": {
        b"this is not json": "not JSON",
        b'{"type":"bogus_command","id":"u1"}': "unknown command type",
        b'{"id":"n1"}': "no type",
        b"[1,2,3]": "not an object",
        b"": "a blank line",
        b'"just a string"': "not an object",
        b"42": "not an object",
        b'{"type":"prompt","id":"p-nomsg"}': "a prompt without message",
    },
    "j2_null": {b"null": "a bare null (crashes 0.73.1 and 0.87.1)"},
    "j_bad_input": {  # p152
        b"this is not json": "not JSON",
        b'{"type": "no_such_command", "id": "req-1"}': "unknown command type",
        b'{"type": "prompt", "id": "req-2"}': "a prompt without message",
    },
    "o_invalid_unicode": {
        b"this is not json": "not JSON",
        b'{"type":"bogus_command","id":"u1"}': "unknown command type",
        b"null": "a bare null",
    },
    "e2_streaming_behavior": {
        b'{"type": "prompt", "message": "bad behavior value", "streamingBehavior": "whenever"}': (
            "an unknown streamingBehavior value"
        ),
    },
    "i_image": {
        b'{"type": "prompt", "message": "image test seed000_source_format", "images": [{"type"'
        b': "image", "source": {"type": "base64", "mediaType": "image/png", "data": "iVBORw0KG'
        b"goAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5Er"
        b'kJggg=="}}]}': "the old image `source` shape",
    },
}


def without_prompt_id(line: bytes) -> bytes:
    return re.sub(rb', "id": "prompt-\d+"', b"", line)


def parse_command(line: bytes) -> Outgoing | None:
    """The command model `line` is, with no field left over; None if it is none."""
    try:
        raw: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return None
    for model in COMMAND_MODELS.get(raw["type"], []):
        try:
            command = model.model_validate_json(line)
        except ValidationError:
            continue
        if not command.model_extra:
            return command
    return None


def test_every_command_type_but_prompt_has_one_model() -> None:
    assert all(COMMAND_MODELS)
    assert {k for k, v in COMMAND_MODELS.items() if len(v) > 1} == {"prompt"}


@pytest.mark.parametrize("path", STDIN, ids=name_of)
def test_every_stdin_line_is_a_command_that_encodes_back_to_itself(path: Path) -> None:
    rejected: set[bytes] = set()
    for raw_line in lines_of(path.read_bytes()):
        line = raw_line.removesuffix(b"\r")  # j_invalid sends one line with CRLF on purpose
        command = parse_command(line)
        if command is None:
            rejected.add(without_prompt_id(line))
        else:
            assert json.loads(encode_command(command)) == json.loads(line)
    assert rejected == set(DELIBERATELY_BAD.get(scenario_of(path), {}))

"""Record bytes → typed output, or a problem value. Never raises.

The fast path is one `TypeAdapter.validate_json` call on the raw bytes
(pydantic-core parses and validates in one pass, faster than `json.loads`
alone). Only when that fails does the slow path look at the record again to
tell an unknown event type (kept as `UnknownEvent`), an unknown UI method (kept
as `OtherUIRequest`) and a malformed record (`MalformedRecord`) apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from bridge.rpc.events import KNOWN_TYPES, KnownOutput, UnknownEvent
from bridge.rpc.framing import OversizedRecord
from bridge.rpc.ui import KNOWN_METHODS, OtherUIRequest

_KNOWN: TypeAdapter[KnownOutput] = TypeAdapter(KnownOutput)

PREVIEW_BYTES = 200  # enough of a bad record to recognise it in a log line


@dataclass(frozen=True, slots=True)
class MalformedRecord:
    """A record that is not JSON, not an object, or a known type with a bad shape."""

    reason: str
    preview: str


DecodeProblem = MalformedRecord | OversizedRecord
Decoded = KnownOutput | UnknownEvent | OtherUIRequest | DecodeProblem


def decode_record(record: bytes) -> Decoded:
    """Decode one framed record (without its LF)."""
    try:
        return _KNOWN.validate_json(record)
    except ValidationError as exc:
        return _slow_path(record, exc)


def _slow_path(record: bytes, exc: ValidationError) -> Decoded:
    try:
        obj: Any = json.loads(record)
    except (ValueError, UnicodeDecodeError) as err:
        return _malformed(record, f"not JSON: {err}")
    except RecursionError:  # nested past the interpreter's limit (pydantic-core's is 255)
        return _malformed(record, "JSON nested too deeply to decode")
    if not isinstance(obj, dict):
        return _malformed(record, f"not a JSON object but {type(obj).__name__}")
    kind = obj.get("type")
    if not isinstance(kind, str):
        return _malformed(record, "no string 'type' field")
    if kind == "extension_ui_request" and isinstance(obj.get("id"), str):
        method = obj.get("method")
        if not isinstance(method, str):
            return _malformed(record, "extension_ui_request: method: not a string")
        if method not in KNOWN_METHODS:
            return OtherUIRequest.model_validate(obj)
    if kind not in KNOWN_TYPES:
        return UnknownEvent.model_validate(obj)
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"][1:]) or "record"
    return _malformed(record, f"{kind}: {where}: {first['msg']}")


def _malformed(record: bytes, reason: str) -> MalformedRecord:
    preview = record[:PREVIEW_BYTES].decode("utf-8", errors="replace")
    return MalformedRecord(reason=reason, preview=preview)

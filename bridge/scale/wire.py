"""What travels between frontends and workers, as JSON in Redis stream entries.

- An admitted `Inbound`, with its attachments already fetched by the frontend (the
  platform's file URLs need the platform's token and connection, which only
  frontends hold): `Carried` holds the bytes, or the reason they could not be had.
- A platform call a worker asks a frontend to make (`Call`: a `PlatformCall`, one
  of the interface's calls and its arguments, with the conversation's key and
  fencing token) and its answer (`Answer`: a message or chat reference, or the
  `PlatformError` it raised, raised again on the worker's side so its outbox treats
  it as it always does).

Everything is a pydantic model over the bridge's own dataclasses, so nothing but
data is ever decoded from Redis (no pickle: what Redis holds must not run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from bridge.model import (
    Attachment,
    AttachmentRefused,
    ChatRef,
    Inbound,
    Keyboard,
    Markup,
    Mention,
    MessageRef,
    ReactionState,
    Task,
)
from bridge.platform import (
    CALLS,
    BadFormatting,
    Made,
    MessageGone,
    NotModified,
    PlatformCall,
    PlatformError,
    RateLimited,
    StreamEnded,
    TooLong,
    TransientError,
)

_BYTES = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")


@dataclass(frozen=True)
class Carried:
    """An attachment as fetched by the frontend."""

    kind: Literal["image", "file", "voice"]
    mime_type: str
    size: int | None
    name: str = ""
    transcript: str = ""
    data: bytes | None = None
    refused: str = ""  # why it could not be had (AttachmentRefused's words)


class Envelope(BaseModel):
    """One admitted inbound on its way to the conversation's owner."""

    model_config = _BYTES

    inbound: Inbound
    carried: tuple[Carried, ...] = ()
    arrived: float = 0.0  # unix time the frontend took it in


class Call(BaseModel):
    """One platform call for a frontend to make: a `PlatformCall`'s fields, flat,
    with the conversation's key and fencing token and the worker's deadline."""

    model_config = _BYTES

    id: str
    method: str  # one of `bridge.platform.CALLS`
    key: str = ""  # the conversation it is for ("" none: fencing not checked)
    fence: int = 0
    deadline: float = 0.0  # unix time after which nobody waits for the answer
    # A run's status shown "live" ([⏹ Stop]) or "over" by this call, or "" (no status):
    # a frontend never makes a live edit of a status it made over (ended.py).
    status: Literal["", "live", "over"] = ""
    chat: ChatRef | None = None
    ref: MessageRef | None = None
    text: str = ""
    markup: Markup = "plain"
    buttons: Keyboard = ()
    force_reply: bool = False
    silent: bool = False
    filename: str = ""
    data: bytes = b""
    press_id: str = ""
    alert: bool = False
    message_id: str = ""
    state: ReactionState = "working"
    tasks: tuple[Task, ...] = ()
    draft_id: int = 0
    user_id: str = ""
    ping: Mention | None = None

    @field_validator("method")
    @classmethod
    def _a_call(cls, method: str) -> str:
        if method not in CALLS:
            raise ValueError(f"{method!r} is no call of the platform interface")
        return method

    @property
    def platform_call(self) -> PlatformCall:
        return PlatformCall(**{f.name: getattr(self, f.name) for f in fields(PlatformCall)})


def carried(call: PlatformCall) -> dict[str, Any]:
    """`call`'s fields, as `Call` takes them."""
    return {f.name: getattr(call, f.name) for f in fields(PlatformCall)}


ErrorName = Literal[
    "RateLimited",
    "NotModified",
    "BadFormatting",
    "MessageGone",
    "StreamEnded",
    "TooLong",
    "TransientError",
    "PlatformError",
    "Fenced",
]


class Answer(BaseModel):
    id: str
    ref: MessageRef | None = None
    chat: ChatRef | None = None
    error: ErrorName | None = None
    message: str = ""
    retry_after: float = 0.0


def answered(call_id: str, made: Made) -> Answer:
    """The answer to a call that was made: what it made (a message, a chat), if anything."""
    return Answer(
        id=call_id,
        ref=made if isinstance(made, MessageRef) else None,
        chat=made if isinstance(made, ChatRef) else None,
    )


class Fenced(PlatformError):
    """The conversation's lease moved to another worker: this one may not touch it."""


# Most specific first: StreamEnded is a MessageGone.
_ERRORS: tuple[tuple[type[PlatformError], ErrorName], ...] = (
    (Fenced, "Fenced"),
    (RateLimited, "RateLimited"),
    (NotModified, "NotModified"),
    (BadFormatting, "BadFormatting"),
    (StreamEnded, "StreamEnded"),
    (MessageGone, "MessageGone"),
    (TooLong, "TooLong"),
    (TransientError, "TransientError"),
    (PlatformError, "PlatformError"),
)


def failed(call_id: str, exc: PlatformError) -> Answer:
    name = next(n for kind, n in _ERRORS if isinstance(exc, kind))
    retry = exc.retry_after if isinstance(exc, RateLimited) else 0.0
    return Answer(id=call_id, error=name, message=str(exc), retry_after=retry)


def raise_for(answer: Answer) -> None:
    """Raise the error an answer carries, as the adapter raised it."""
    match answer.error:
        case None:
            return
        case "RateLimited":
            raise RateLimited(answer.retry_after)
        case name:
            kind = next(k for k, n in _ERRORS if n == name)
            raise kind(answer.message)


def envelope(inbound: Inbound, carried: tuple[Carried, ...], arrived: float) -> str:
    return Envelope(
        inbound=replace(inbound, attachments=()), carried=carried, arrived=arrived
    ).model_dump_json()


def unwrap(raw: str) -> tuple[Inbound, float]:
    """The inbound of an envelope, its attachments fetchable again; when it arrived."""
    env = Envelope.model_validate_json(raw)
    attachments = tuple(_attachment(c) for c in env.carried)
    return replace(env.inbound, attachments=attachments), env.arrived


def _attachment(carried: Carried) -> Attachment:
    async def fetch(cap: int) -> bytes:
        if carried.refused or carried.data is None:
            raise AttachmentRefused(carried.refused or "it could not be fetched")
        if len(carried.data) > cap:
            raise AttachmentRefused("it is over the limit")
        return carried.data

    return Attachment(
        carried.mime_type,
        carried.size,
        fetch,
        kind=carried.kind,
        name=carried.name,
        transcript=carried.transcript,
    )


# The bridge's dataclasses name these only for type checkers; pydantic needs them now.
_NAMES = {"Callable": Callable, "Awaitable": Awaitable, "Collection": Collection}
for _model in (Envelope, Call, Answer):
    _model.model_rebuild(_types_namespace=_NAMES)

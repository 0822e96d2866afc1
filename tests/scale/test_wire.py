"""What travels between frontends and workers (bridge/scale/wire.py): inbounds in
envelopes, with their attachments fetched, and platform errors in call answers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bridge.model import (
    Attachment,
    AttachmentRefused,
    Button,
    ButtonPress,
    ChatRef,
    Image,
    Inbound,
    MessageRef,
    Sender,
    Task,
)
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    StreamEnded,
    TooLong,
    TransientError,
)
from bridge.scale.wire import Answer, Call, Carried, Fenced, envelope, failed, raise_for, unwrap

pytestmark = pytest.mark.anyio

CHAT = ChatRef("-100200", thread_id="7", is_group=True)
ANN = Sender("U1", "Ann")
BINARY = bytes(range(256)) + b"\xff\xfe\x00\x80"  # not UTF-8: must travel as base64
ARRIVED = 1_700_000_123.25


def inbound(**fields: object) -> Inbound:
    base: dict[str, object] = {"key": "tg:-100200:7", "chat": CHAT, "sender": ANN, "event_id": "e1"}
    return Inbound(**(base | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "original",
    [
        pytest.param(inbound(text="hi"), id="plain-text"),
        pytest.param(
            inbound(images=(Image(BINARY, "image/png"), Image(b"\x89PNG", "image/jpeg"))),
            id="images-with-binary-bytes",
        ),
        pytest.param(
            inbound(
                press=ButtonPress("tok-1", "press-9", MessageRef(CHAT, "41"), text="typed answer")
            ),
            id="button-press-with-message-ref",
        ),
        pytest.param(inbound(press=ButtonPress("tok-2", "press-10")), id="press-without-message"),
        pytest.param(
            inbound(sender=Sender("U2", "Bo", is_bot=True, groups=frozenset({"S1", "S2"}))),
            id="sender-groups",
        ),
        pytest.param(
            inbound(
                event_id="",
                reply_to="40",
                message_id="1700.1",
                from_self=True,
                is_edit=True,
                private_reply="U1:C1",
            ),
            id="reply-and-flags",
        ),
    ],
)
def test_an_envelope_gives_back_the_inbound_it_was_made_of(original: Inbound) -> None:
    again, arrived = unwrap(envelope(original, (), ARRIVED))

    assert again == original
    assert arrived == ARRIVED
    assert isinstance(again.sender.groups, frozenset)


async def test_attachments_travel_as_carried_and_come_back_fetchable() -> None:
    announced = Attachment("image/png", len(BINARY), _never_fetched, kind="image", name="a.png")
    original = inbound(text="see", attachments=(announced,))
    carried = (
        Carried("image", "image/png", len(BINARY), name="a.png", data=BINARY),
        Carried("voice", "audio/ogg", 9, name="v.ogg", transcript="hello", refused="too big"),
    )

    again, _ = unwrap(envelope(original, carried, ARRIVED))

    assert [(a.kind, a.mime_type, a.size, a.name, a.transcript) for a in again.attachments] == [
        ("image", "image/png", len(BINARY), "a.png", ""),
        ("voice", "audio/ogg", 9, "v.ogg", "hello"),
    ]
    assert await again.attachments[0].fetch(len(BINARY)) == BINARY
    with pytest.raises(AttachmentRefused, match=r"^too big$"):
        await again.attachments[1].fetch(10**9)


@dataclass(frozen=True)
class FetchCase:
    carried: Carried
    cap: int
    data: bytes | None  # what fetch gives, or None: it refuses
    refusal: str = ""  # the refusal's words (a regex)


FETCHES = [
    pytest.param(
        FetchCase(Carried("file", "x/y", 4, data=b"\x00\xff\x01\x80"), 4, b"\x00\xff\x01\x80"),
        id="data-at-the-cap",
    ),
    pytest.param(FetchCase(Carried("file", "x/y", 0, data=b""), 0, b""), id="empty-file"),
    pytest.param(
        FetchCase(Carried("file", "x/y", 5, data=b"12345"), 4, None, "over the limit"),
        id="cap-smaller-than-data",
    ),
    pytest.param(
        FetchCase(
            Carried("image", "image/png", None, refused="it is over the limit of 20 MB"),
            10**9,
            None,
            "^it is over the limit of 20 MB$",
        ),
        id="refused-with-its-reason",
    ),
    pytest.param(
        FetchCase(Carried("file", "x/y", None), 10**9, None, "could not be fetched"),
        id="no-data-no-reason",
    ),
]


@pytest.mark.parametrize("case", FETCHES)
async def test_a_carried_attachment_fetches_its_data_or_its_refusal(case: FetchCase) -> None:
    again, _ = unwrap(envelope(inbound(), (case.carried,), ARRIVED))
    (attachment,) = again.attachments

    if case.data is None:
        with pytest.raises(AttachmentRefused, match=case.refusal):
            await attachment.fetch(case.cap)
    else:
        assert await attachment.fetch(case.cap) == case.data


def test_a_call_with_binary_data_and_buttons_survives_json() -> None:
    call = Call(
        id="c1",
        method="upload",
        key="tg:1",
        fence=3,
        deadline=ARRIVED,
        chat=CHAT,
        ref=MessageRef(CHAT, "5"),
        filename="out.bin",
        data=BINARY,
        buttons=((Button("Yes", "t:y"), Button("No", "t:n")),),
        tasks=(Task("call_1", "bash", "complete", "ok"),),
    )

    assert Call.model_validate_json(call.model_dump_json()) == call


class Odd(PlatformError):
    """A platform error the wire has no name for."""


@pytest.mark.parametrize(
    ("raised", "arrives_as", "retry_after"),
    [
        pytest.param(RateLimited(2.5), RateLimited, 2.5, id="rate-limited-keeps-retry-after"),
        pytest.param(NotModified("same"), NotModified, None, id="not-modified"),
        pytest.param(BadFormatting("entities"), BadFormatting, None, id="bad-formatting"),
        pytest.param(MessageGone("gone"), MessageGone, None, id="message-gone"),
        pytest.param(StreamEnded("not streaming"), StreamEnded, None, id="stream-ended-stays"),
        pytest.param(TooLong("long"), TooLong, None, id="too-long"),
        pytest.param(TransientError("later"), TransientError, None, id="transient"),
        pytest.param(Fenced("tg:1 moved"), Fenced, None, id="fenced"),
        pytest.param(PlatformError("plain"), PlatformError, None, id="plain-platform-error"),
        pytest.param(Odd("odd"), PlatformError, None, id="unnamed-subclass-is-plain"),
    ],
)
def test_a_platform_error_is_raised_again_from_its_answer(
    raised: PlatformError, arrives_as: type[PlatformError], retry_after: float | None
) -> None:
    answer = Answer.model_validate_json(failed("c1", raised).model_dump_json())

    with pytest.raises(PlatformError) as info:
        raise_for(answer)

    assert type(info.value) is arrives_as
    assert str(info.value) == str(raised)
    assert info.value.permanent == raised.permanent
    if retry_after is not None:
        assert isinstance(info.value, RateLimited)
        assert info.value.retry_after == retry_after


def test_an_answer_without_error_raises_nothing() -> None:
    answer = Answer(id="c1", ref=MessageRef(CHAT, "5"))

    raise_for(Answer.model_validate_json(answer.model_dump_json()))


async def _never_fetched(cap: int) -> bytes:
    raise AssertionError("envelope must not fetch: the frontend carries what it fetched")

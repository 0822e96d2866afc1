"""Fuzzing `adapters.telegram.convert`: any update shaped like Telegram's converts or is ignored.

The boundary's contract (adapters/malformed.py): `convert` answers an `Incoming`
whose `Inbound` holds the types it declares, or None ("not for the bridge": a
channel post, a sticker, a payload of the wrong shape); it never raises into the
update loop. Realistic updates are built like the Bot API's (messages, edits and
button presses in private chats, groups and forum topics; text and captions with
mention and command entities at their UTF-16 offsets; photos, documents, replies;
from people, other bots, the bot itself, or anonymous admins) and must also read
the same after python-telegram-bot's round trip (`Update.de_json(...).to_dict()`),
which is what the runner hands the converter. Then the same updates, and the
real-shaped updates of tests/adapters/telegram/test_convert.py, get their fields dropped,
replaced by JSON of another type, or joined by extra fields.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from telegram import Update

from adapters.telegram.convert import Incoming, Me, conversation_key, convert
from tests.adapters.telegram.test_convert import CASES
from tests.support.fuzzing import FUZZ, TEXT, assert_well_typed, mutated, ran, swaps

ME = Me(id=123456, username="pi_test_bot")
EVERYONE = Me(id=123456, username="pi_test_bot", group_trigger="all")
BOT = {"id": 123456, "is_bot": True, "first_name": "Pi", "username": "pi_test_bot"}
ALICE = {"id": 42, "is_bot": False, "first_name": "Alice", "username": "al"}
HELPER = {"id": 999, "is_bot": True, "first_name": "Helper", "username": "helper_bot"}
NAMELESS = {"id": 7, "is_bot": False, "first_name": ""}
CHATS: dict[str, dict[str, Any]] = {
    "private": {"id": 42, "type": "private", "first_name": "Alice"},
    "group": {"id": -1234, "type": "group", "title": "Team"},
    "supergroup": {"id": -1001234, "type": "supergroup", "title": "Team"},
    "forum": {"id": -1005678, "type": "supergroup", "title": "Forum", "is_forum": True},
}
# Pieces a message is made of; the ones with an entity kind get an entity at their offset.
PIECES: list[tuple[str, str | None]] = [
    ("@pi_test_bot", "mention"),
    ("@PI_TEST_BOT,", "mention"),
    ("@helper_bot", "mention"),
    ("/stop", "bot_command"),
    ("/start", "bot_command"),
    ("/model@pi_test_bot", "bot_command"),
    ("/status@helper_bot", "bot_command"),
    ("/start@pi_test_bot", "bot_command"),
    ("Pi", "text_mention"),
    ("https://example.com", "url"),
    (">>", None),
    ("!new", None),
    ("//x", None),
]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@st.composite
def texts(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    """A message text and its entities, offsets counted in UTF-16 units as the Bot API
    counts them; now and then an entity that points outside the text."""
    text, entities = "", []
    for _ in range(draw(st.integers(0, 5))):
        if text:
            text += draw(st.sampled_from([" ", "  ", "\n", ", ", ""]))
        piece, kind = draw(st.sampled_from(PIECES)) if draw(st.booleans()) else (draw(TEXT), None)
        if kind is not None and draw(st.integers(0, 4)):
            entity: dict[str, Any] = {"type": kind, "offset": utf16_len(text)}
            entity["length"] = utf16_len(piece.rstrip(","))  # "@bot," mentions "@bot"
            if kind == "text_mention":
                entity["user"] = draw(st.sampled_from([BOT, ALICE]))
            entities.append(entity)
        text += piece
    if draw(st.integers(0, 9)) == 0:
        entities.append({"type": "mention", "offset": 10_000, "length": draw(st.integers(-5, 5))})
    return text, entities


def user(draw: st.DrawFn) -> dict[str, Any] | None:
    return draw(st.sampled_from([ALICE, ALICE, HELPER, BOT, NAMELESS, None]))


@st.composite
def photo_sizes(draw: st.DrawFn) -> list[dict[str, Any]]:
    sizes = []
    for n in range(draw(st.integers(1, 4))):
        size: dict[str, Any] = {"file_id": f"p{n}", "file_unique_id": f"u{n}"}
        size |= {"width": draw(st.integers(1, 2560)), "height": draw(st.integers(1, 2560))}
        if draw(st.booleans()):
            size["file_size"] = draw(st.integers(0, 30_000_000))
        sizes.append(size)
    return sizes


@st.composite
def messages(draw: st.DrawFn, chat_kind: str | None = None) -> dict[str, Any]:
    kind = chat_kind or draw(st.sampled_from(sorted(CHATS)))
    message: dict[str, Any] = {
        "message_id": draw(st.integers(1, 2**31 - 1)),
        "date": 1_760_000_000,
        "chat": CHATS[kind],
    }
    if (who := user(draw)) is not None:
        message["from"] = who
    else:  # an anonymous group admin posts as the group
        message["sender_chat"] = CHATS[kind]
    text, entities = draw(texts())
    field, entities_field = draw(
        st.sampled_from([("text", "entities"), ("caption", "caption_entities")])
    )
    if text or draw(st.booleans()):
        message[field] = text
    if entities:
        message[entities_field] = entities
    if kind == "forum":
        message["message_thread_id"] = draw(st.integers(1, 500))
        message["is_topic_message"] = draw(st.booleans())
    if draw(st.booleans()):
        message["photo"] = draw(photo_sizes())
    if draw(st.integers(0, 3)) == 0:
        mime = draw(st.sampled_from(["image/png", "image/webp", "application/pdf", "text/plain"]))
        message["document"] = {"file_id": "d1", "file_unique_id": "du1", "mime_type": mime}
    if draw(st.integers(0, 5)) == 0:
        message["sticker"] = {
            "file_id": "s1",
            "file_unique_id": "su1",
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
        }
    if draw(st.booleans()):
        message["reply_to_message"] = draw(replied(message))
    return message


@st.composite
def replied(draw: st.DrawFn, message: dict[str, Any]) -> dict[str, Any]:
    """What `message` replies to: the bot's dialog, someone's message, or (in a forum)
    the topic's opening message, which every topic message "replies" to."""
    thread = message.get("message_thread_id")
    ids = [draw(st.integers(1, 2**31 - 1)), *([thread] if thread is not None else [])]
    original: dict[str, Any] = {
        "message_id": draw(st.sampled_from(ids)),
        "date": 1_759_999_000,
        "chat": message["chat"],
        "text": "Branch?",
    }
    if (who := draw(st.sampled_from([BOT, ALICE, None]))) is not None:
        original["from"] = who
    return original


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    update: dict[str, Any] = {"update_id": draw(st.integers(0, 2**31 - 1))}
    kind = draw(st.sampled_from(["message", "edited_message", "callback_query", "channel_post"]))
    if kind == "callback_query":
        query: dict[str, Any] = {"id": "q1", "from": ALICE, "chat_instance": "ci"}
        if draw(st.integers(0, 4)):
            query["message"] = draw(messages())
        else:  # a press on an inline-mode message carries no message
            query["inline_message_id"] = "im1"
        if draw(st.integers(0, 4)):
            query["data"] = draw(st.text(max_size=64))
        update["callback_query"] = query
    elif kind == "channel_post":
        post = draw(messages("group")) | {"chat": {"id": -100999, "type": "channel"}}
        update["channel_post"] = post
    else:
        message = draw(messages())
        if kind == "edited_message":
            message["edit_date"] = 1_760_000_100
        update[kind] = message
    return update


def check(update: dict[str, Any], me: Me) -> Incoming | None:
    """`convert`, and what its answer promises whatever the update held."""
    incoming = convert(update, me)
    assert incoming is None or isinstance(incoming, Incoming), incoming
    if incoming is not None:
        inbound = incoming.inbound
        assert_well_typed(inbound)
        assert inbound.event_id == f"tg:{me.id}:{update['update_id']}"
        assert inbound.key == conversation_key(inbound.chat)
        assert isinstance(incoming.mime_type, str), incoming
        assert incoming.file_size is None or isinstance(incoming.file_size, int), incoming
    return incoming


@FUZZ
@given(updates(), st.sampled_from([ME, EVERYONE]))
def test_a_realistic_update_becomes_a_well_formed_inbound_or_is_ignored(
    update: dict[str, Any], me: Me
) -> None:
    ran("telegram: realistic updates")
    incoming = check(update, me)
    if "channel_post" in update:
        assert incoming is None
    if incoming is None:
        return
    inbound, query = incoming.inbound, update.get("callback_query")
    assert (inbound.press is not None) == (query is not None)
    if query is not None:
        assert inbound.press is not None
        assert inbound.press.token == query.get("data", "")
    assert inbound.is_edit == ("edited_message" in update)
    sent = query or update.get("message") or update["edited_message"]
    assert inbound.from_self == (sent.get("from") == BOT)
    message = query["message"] if query is not None else sent
    topic = message.get("message_thread_id") if message.get("is_topic_message") else None
    chat = message["chat"]["id"]
    assert inbound.key == (f"tg:{chat}" if topic is None else f"tg:{chat}:{topic}")
    if query is None and message.get("photo"):
        largest = max(
            message["photo"], key=lambda s: (s["width"] * s["height"], s.get("file_size", 0))
        )
        assert incoming.file_id == largest["file_id"]  # the best quality Telegram has


@FUZZ
@given(updates(), st.sampled_from([ME, EVERYONE]))
def test_an_update_reads_the_same_after_the_telegram_library_parsed_it(
    update: dict[str, Any], me: Me
) -> None:
    """The runner converts `Update.to_dict()`, not the raw JSON: python-telegram-bot
    must not hide anything the converter reads."""
    ran("telegram: library round trip")
    assert convert(Update.de_json(update, None).to_dict(), me) == convert(update, me)


REAL = [update for _, update, _ in CASES]
PHOTO: dict[str, Any] = {  # as a private photo with a caption arrives, its sizes smallest first
    "update_id": 9,
    "message": {
        "message_id": 11,
        "date": 1_760_000_000,
        "chat": CHATS["private"],
        "from": ALICE,
        "caption": "what is this?",
        "photo": [
            {"file_id": "p0", "file_unique_id": "u0", "width": 90, "height": 60, "file_size": 1},
            {"file_id": "p1", "file_unique_id": "u1", "width": 1280, "height": 853},
        ],
    },
}
DOCUMENT: dict[str, Any] = {
    "update_id": 10,
    "message": {
        "message_id": 12,
        "date": 1_760_000_000,
        "chat": CHATS["private"],
        "from": ALICE,
        "document": {"file_id": "d1", "file_unique_id": "du1", "mime_type": "image/png"},
    },
}
PRESS: dict[str, Any] = {
    "update_id": 11,
    "callback_query": {
        "id": "q1",
        "from": ALICE,
        "chat_instance": "ci",
        "data": "tok-1",
        "message": {
            "message_id": 13,
            "date": 1_760_000_000,
            "chat": CHATS["forum"],
            "from": BOT,
            "message_thread_id": 3,
            "is_topic_message": True,
            "text": "Allow?",
        },
    },
}
SAMPLES = [*REAL, PHOTO, DOCUMENT, PRESS]


def test_every_field_of_a_real_update_dropped_or_swapped_alone_is_handled() -> None:
    for sample in SAMPLES:
        for update in swaps(sample):
            ran("telegram: single-field swaps")
            for me in (ME, EVERYONE):
                try:
                    check(update, me)
                except Exception as exc:
                    raise AssertionError(f"{update!r} with {me}") from exc


@FUZZ
@given(st.sampled_from(SAMPLES).flatmap(mutated) | updates().flatmap(mutated), st.just(ME))
# Found by this suite: an infinite photo width (JSON's 1e400 reads as inf) escaped
# as an OverflowError.
@example(
    {
        "update_id": 1,
        "message": {
            "message_id": 1,
            "chat": {"id": 1, "type": "private"},
            "photo": [{"file_id": "p", "width": float("inf"), "height": 1}],
        },
    },
    ME,
)
# Found by this suite: callback data of another type (here 0) became the press's token,
# which the store then takes as a key.
@example({**PRESS, "callback_query": {**PRESS["callback_query"], "data": 0}}, ME)
@example({"update_id": 1, "message": {"chat": []}}, ME)
@example({"update_id": 1, "callback_query": {"id": "q", "message": "text"}}, ME)
@example({"update_id": 1, "message": {"chat": {"id": 1}, "text": {"a": 1}}}, ME)
def test_an_update_of_the_wrong_shape_is_ignored_without_raising(
    update: dict[str, Any], me: Me
) -> None:
    ran("telegram: mutated updates")
    check(update, me)

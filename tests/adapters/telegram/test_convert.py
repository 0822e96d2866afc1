"""`adapters.telegram.convert` on real-shaped Bot API updates (JSON as Telegram sends it).

Each case is an update and the `Inbound` fields expected from it (None: ignored).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.telegram.convert import Me, convert
from bridge.model import ButtonPress, ChatRef, MessageRef, Sender

ME = Me(id=123456, username="pi_test_bot")
BOT = {"id": 123456, "is_bot": True, "first_name": "Pi", "username": "pi_test_bot"}
ALICE = {"id": 42, "is_bot": False, "first_name": "Alice", "last_name": "Doe", "username": "al"}
OTHER_BOT = {"id": 999, "is_bot": True, "first_name": "Helper", "username": "helper_bot"}
PRIVATE = {"id": 42, "first_name": "Alice", "type": "private"}
GROUP = {"id": -1001234, "title": "Team", "type": "supergroup"}
FORUM = {"id": -1005678, "title": "Forum", "type": "supergroup", "is_forum": True}


def message(chat: dict[str, Any], text: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message_id": 10,
        "from": ALICE,
        "chat": chat,
        "date": 1_760_000_000,
        "text": text,
    }
    body.update(extra)
    return body


def update(**content: Any) -> dict[str, Any]:
    # Round-trip through JSON: the converter must work on exactly what arrives.
    return dict(json.loads(json.dumps({"update_id": 555, **content})))


def entity(kind: str, offset: int, length: int) -> dict[str, Any]:
    return {"type": kind, "offset": offset, "length": length}


CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    (
        "a private message",
        update(message=message(PRIVATE, "list the files")),
        {
            "key": "tg:42",
            "chat": ChatRef("42"),
            "text": "list the files",
            "event_id": "tg:123456:555",  # the bot's id: update ids count per bot
        },
    ),
    (
        "a command with the bot's name is kept as text",
        update(
            message=message(PRIVATE, "/stop@pi_test_bot", entities=[entity("bot_command", 0, 17)])
        ),
        {"text": "/stop@pi_test_bot"},
    ),
    (
        "a group message that does not address the bot",
        update(message=message(GROUP, "lunch?")),
        None,
    ),
    (
        "a group mention, without the mention",
        update(
            message=message(
                GROUP, "@pi_test_bot fix the build", entities=[entity("mention", 0, 12)]
            )
        ),
        {"key": "tg:-1001234", "text": "fix the build"},
    ),
    (
        "a group mention after an emoji counts UTF-16 offsets",
        update(message=message(GROUP, "😀 @PI_TEST_BOT hi", entities=[entity("mention", 3, 12)])),
        {"text": "😀 hi"},
    ),
    (
        "a mention of another user in a group",
        update(message=message(GROUP, "@bob look", entities=[entity("mention", 0, 4)])),
        None,
    ),
    (
        "a group command for everyone",
        update(message=message(GROUP, "/status", entities=[entity("bot_command", 0, 7)])),
        {"text": "/status"},
    ),
    (
        "a group command for another bot",
        update(
            message=message(GROUP, "/status@helper_bot", entities=[entity("bot_command", 0, 18)])
        ),
        None,
    ),
    (
        "a group reply to the bot",
        update(
            message=message(
                GROUP,
                "yes, go on",
                reply_to_message=message(GROUP, "Continue?", message_id=7, **{"from": BOT}),
            )
        ),
        {"text": "yes, go on", "reply_to": "7"},
    ),
    (
        "a forum topic message",
        update(
            message=message(
                FORUM,
                "@pi_test_bot deploy",
                entities=[entity("mention", 0, 12)],
                message_thread_id=3,
                is_topic_message=True,
                reply_to_message=message(
                    FORUM, "", message_id=3, forum_topic_created={"name": "ops"}
                ),
            )
        ),
        {
            "key": "tg:-1005678:3",
            "chat": ChatRef("-1005678", "3", is_group=True),
            "reply_to": None,
        },
    ),
    (
        "a reply thread in a plain supergroup is not a topic",
        update(
            message=message(
                GROUP, "/new", message_thread_id=9, entities=[entity("bot_command", 0, 4)]
            )
        ),
        {"key": "tg:-1001234", "chat": ChatRef("-1001234", is_group=True)},
    ),
    (
        "a private reply (a dialog answer)",
        update(
            message=message(
                PRIVATE,
                "main",
                reply_to_message=message(PRIVATE, "Branch?", message_id=4, **{"from": BOT}),
            )
        ),
        {"reply_to": "4"},
    ),
    (
        "an edited message",
        update(edited_message=message(PRIVATE, "typo fixed", edit_date=1_760_000_100)),
        {"is_edit": True, "text": "typo fixed"},
    ),
    (
        "another bot's message",
        update(message=message(PRIVATE, "beep", **{"from": OTHER_BOT})),
        {"sender": Sender("999", "Helper", is_bot=True), "from_self": False},
    ),
    (
        "the bot's own message",
        update(message=message(PRIVATE, "echo", **{"from": BOT})),
        {"from_self": True},
    ),
    (
        "a sticker has nothing to read",
        update(
            message={k: v for k, v in message(PRIVATE, "").items() if k != "text"}
            | {"sticker": {"file_id": "s"}}
        ),
        None,
    ),
    (
        "a channel post",
        update(
            channel_post={
                "message_id": 1,
                "chat": {"id": -100, "type": "channel"},
                "date": 1,
                "text": "news",
            }
        ),
        None,
    ),
    (
        "/start (sent when a user opens the bot) asks for the help text",
        update(message=message(PRIVATE, "/start", entities=[entity("bot_command", 0, 6)])),
        {"text": "/help"},
    ),
    (
        "/start with a deep-link payload asks for the help text too",
        update(message=message(PRIVATE, "/start ref42", entities=[entity("bot_command", 0, 6)])),
        {"text": "/help"},
    ),
    (
        "/start in a group keeps the bot's name for the router",
        update(
            message=message(GROUP, "/start@pi_test_bot", entities=[entity("bot_command", 0, 18)])
        ),
        {"text": "/help@pi_test_bot", "chat": ChatRef("-1001234", is_group=True)},
    ),
    (
        "a word starting with /start is not the command",
        update(message=message(PRIVATE, "/started it")),
        {"text": "/started it"},
    ),
    (
        "a sender's full name",
        update(message=message(PRIVATE, "hi")),
        {"sender": Sender("42", "Alice Doe")},
    ),
]


@pytest.mark.parametrize(("case", "raw", "expected"), CASES, ids=[c[0] for c in CASES])
def test_an_update_converts_to_the_expected_inbound(
    case: str, raw: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    incoming = convert(raw, ME)
    if expected is None:
        assert incoming is None
        return
    assert incoming is not None
    got = {name: getattr(incoming.inbound, name) for name in expected}
    assert got == expected


def test_all_group_messages_are_taken_with_the_all_trigger() -> None:
    me = Me(ME.id, ME.username, group_trigger="all")
    incoming = convert(update(message=message(GROUP, "lunch?")), me)
    assert incoming is not None
    assert incoming.inbound.text == "lunch?"


def test_a_button_press_carries_its_token_and_query_id() -> None:
    sent = message(PRIVATE, "Allow rm -rf?", message_id=12, **{"from": BOT})
    raw = update(
        callback_query={
            "id": "4471",
            "from": ALICE,
            "chat_instance": "-88",
            "message": sent,
            "data": "tok123",
        }
    )
    incoming = convert(raw, ME)
    assert incoming is not None
    assert incoming.inbound.press == ButtonPress("tok123", "4471", MessageRef(ChatRef("42"), "12"))
    assert (incoming.inbound.key, incoming.inbound.sender.id) == ("tg:42", "42")


def test_a_press_in_a_forum_topic_belongs_to_the_topic() -> None:
    sent = message(FORUM, "Pick", message_id=30, message_thread_id=3, is_topic_message=True)
    raw = update(
        callback_query={
            "id": "1",
            "from": ALICE,
            "chat_instance": "c",
            "message": sent,
            "data": "t",
        }
    )
    incoming = convert(raw, ME)
    assert incoming is not None
    assert incoming.inbound.key == "tg:-1005678:3"


def test_a_photo_names_its_largest_size_and_keeps_the_caption() -> None:
    sizes = [
        {"file_id": "small", "file_unique_id": "a", "width": 90, "height": 67, "file_size": 1200},
        {
            "file_id": "large",
            "file_unique_id": "c",
            "width": 1280,
            "height": 960,
            "file_size": 90000,
        },
        {
            "file_id": "medium",
            "file_unique_id": "b",
            "width": 320,
            "height": 240,
            "file_size": 15000,
        },
    ]
    body = message(PRIVATE, "", photo=sizes, caption="what is this?")
    del body["text"]
    incoming = convert(update(message=body), ME)
    assert incoming is not None
    assert (incoming.file_id, incoming.mime_type) == ("large", "image/jpeg")
    assert incoming.inbound.text == "what is this?"


def test_an_image_sent_as_a_file_keeps_its_type() -> None:
    body = message(
        PRIVATE, "", document={"file_id": "doc1", "file_unique_id": "d", "mime_type": "image/png"}
    )
    del body["text"]
    incoming = convert(update(message=body), ME)
    assert incoming is not None
    assert (incoming.file_id, incoming.mime_type, incoming.inbound.text) == (
        "doc1",
        "image/png",
        "",
    )

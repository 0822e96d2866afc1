"""Discord payloads → Inbound: table-driven over payloads shaped like Discord's own
(message objects of MESSAGE_CREATE, interaction objects of INTERACTION_CREATE), no I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.discord.convert import (
    Me,
    Place,
    SharedFile,
    button_id,
    chat_of,
    clean_text,
    conversation_key,
    from_command,
    from_message,
    from_press,
    from_submission,
    in_thread,
    parse_press_ref,
    posted_in,
    press_ref,
    reacted_in,
    shared_files,
    token_of,
)
from bridge.model import ChatRef, MessageRef

ME = Me("900")
GUILD, GENERAL, FORUM, THREAD, POST, DM = "1", "10", "15", "20", "25", "30"
IN_GENERAL = Place(GENERAL, "text", GUILD)
IN_THREAD = Place(THREAD, "thread", GUILD, GENERAL)
IN_POST = Place(POST, "forum_post", GUILD, FORUM)
IN_DM = Place(DM, "dm")
THREAD_KEY = f"discord:{GUILD}:{GENERAL}:{THREAD}"
POST_KEY = f"discord:{GUILD}:{FORUM}:{POST}"
KNOWN = frozenset({THREAD_KEY})


def fixture(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text)
    return loaded


ALICE = {"id": "100", "username": "alice", "global_name": "Alice"}
MENTION = fixture("""{"id": "500", "type": 0, "content": "<@900> fix the build",
  "author": {"id": "100", "username": "alice", "global_name": "Alice"},
  "member": {"roles": ["7"]}, "mentions": [{"id": "900", "username": "pi", "bot": true}],
  "attachments": [], "flags": 0}""")
NICK_MENTION = fixture("""{"id": "501", "type": 0, "content": "hey <@!900>, look",
  "author": {"id": "100", "username": "alice"}, "mentions": [], "flags": 0}""")
CHATTER = fixture("""{"id": "502", "type": 0, "content": "lunch?",
  "author": {"id": "100", "username": "alice"}, "mentions": [], "flags": 0}""")
REPLY = fixture("""{"id": "503", "type": 19, "content": "and the tests",
  "author": {"id": "100", "username": "alice"}, "mentions": [],
  "message_reference": {"message_id": "480", "channel_id": "20"}, "flags": 0}""")
OWN = fixture("""{"id": "504", "type": 0, "content": "working…",
  "author": {"id": "900", "username": "pi", "bot": true}, "mentions": [], "flags": 0}""")
OTHER_BOT = fixture("""{"id": "505", "type": 0, "content": "deploy done",
  "author": {"id": "901", "username": "ci", "bot": true}, "mentions": [], "flags": 0}""")
PINNED = fixture("""{"id": "506", "type": 6, "content": "",
  "author": {"id": "100", "username": "alice"}, "mentions": [], "flags": 0}""")
WITHHELD = fixture("""{"id": "507", "type": 0, "content": "",
  "author": {"id": "100", "username": "alice"}, "mentions": [], "attachments": [],
  "flags": 0}""")
VOICE = fixture("""{"id": "508", "type": 0, "content": "", "flags": 8192,
  "author": {"id": "100", "username": "alice"}, "mentions": [],
  "attachments": [{"id": "1", "filename": "voice-message.ogg", "size": 4242,
    "url": "https://cdn.discordapp.com/attachments/30/1/voice-message.ogg?ex=1&is=2&hm=3",
    "content_type": "audio/ogg", "duration_secs": 2.0, "waveform": "AAAA"}]}""")
FILES = fixture("""{"id": "509", "type": 0, "content": "what is this?", "flags": 0,
  "author": {"id": "100", "username": "alice"}, "mentions": [],
  "attachments": [
    {"id": "2", "filename": "shot.png", "size": 10, "url": "https://cdn.discordapp.com/a/2",
     "content_type": "image/png"},
    {"id": "3", "filename": "build.log", "size": 20, "url": "https://cdn.discordapp.com/a/3",
     "content_type": "text/plain; charset=utf-8"},
    {"id": "4", "filename": "song.mp3", "url": "https://cdn.discordapp.com/a/4",
     "content_type": "audio/mpeg"},
    {"id": "5", "filename": "nothing", "content_type": "text/plain"}
  ]}""")


@pytest.mark.parametrize(
    ("message", "place", "key", "chat", "text", "opens", "adopts"),
    [
        pytest.param(
            MENTION,
            IN_GENERAL,
            f"discord:{GUILD}:{GENERAL}",
            ChatRef(GENERAL),
            "fix the build",
            True,
            False,
            id="a mention in a channel opens a thread",
        ),
        pytest.param(
            NICK_MENTION,
            IN_GENERAL,
            f"discord:{GUILD}:{GENERAL}",
            ChatRef(GENERAL),
            "hey look",
            True,
            False,
            id="a nickname mention counts too",
        ),
        pytest.param(
            CHATTER,
            IN_THREAD,
            THREAD_KEY,
            ChatRef(GENERAL, THREAD),
            "lunch?",
            False,
            False,
            id="a message in a known thread",
        ),
        pytest.param(
            MENTION,
            Place("21", "thread", GUILD, GENERAL),
            f"discord:{GUILD}:{GENERAL}:21",
            ChatRef(GENERAL, "21"),
            "fix the build",
            False,
            True,
            id="a mention adopts an unknown thread",
        ),
        pytest.param(
            MENTION,
            IN_POST,
            POST_KEY,
            ChatRef(POST),
            "fix the build",
            False,
            True,
            id="a mention adopts a forum post",
        ),
        pytest.param(
            CHATTER,
            IN_DM,
            f"discord:@me:{DM}",
            ChatRef(DM),
            "lunch?",
            False,
            False,
            id="a direct message",
        ),
    ],
)
def test_messages_for_the_bridge(
    message: dict[str, Any],
    place: Place,
    key: str,
    chat: ChatRef,
    text: str,
    opens: bool,
    adopts: bool,
) -> None:
    converted = from_message(message, place, ME, KNOWN)
    assert converted is not None
    inbound = converted.inbound
    assert (inbound.key, inbound.chat, inbound.text) == (key, chat, text)
    assert (converted.opens_thread, converted.adopts) == (opens, adopts)
    assert inbound.event_id == f"discord:900:m{message['id']}"
    assert inbound.message_id == message["id"]


@pytest.mark.parametrize(
    ("message", "place"),
    [
        pytest.param(CHATTER, IN_GENERAL, id="chatter in a channel"),
        pytest.param(CHATTER, Place("21", "thread", GUILD, GENERAL), id="an unknown thread"),
        pytest.param(CHATTER, IN_POST, id="an unknown forum post"),
        pytest.param(PINNED, IN_DM, id="a system message"),
        pytest.param(WITHHELD, IN_THREAD, id="text withheld without the content intent"),
        pytest.param(MENTION, Place("40", "other", GUILD), id="a voice channel's chat"),
        pytest.param({"id": "1", "type": 0}, IN_DM, id="malformed: no author"),
        pytest.param({"id": "1", "author": None, "content": "x"}, IN_DM, id="malformed author"),
    ],
)
def test_messages_not_for_the_bridge(message: dict[str, Any], place: Place) -> None:
    assert from_message(message, place, ME, KNOWN) is None


def test_the_senders_roles_and_bots_are_carried_for_admission() -> None:
    converted = from_message(MENTION, IN_GENERAL, ME)
    assert converted is not None
    sender = converted.inbound.sender
    assert (sender.id, sender.name, sender.groups) == ("100", "Alice", frozenset({"7"}))
    assert sender.named_in({"7"}), "a member of an allowed role is allowed"
    own = from_message(OWN, IN_THREAD, ME, KNOWN)
    other = from_message(OTHER_BOT, IN_THREAD, ME, KNOWN)
    assert own is not None
    assert own.inbound.from_self
    assert other is not None
    assert other.inbound.sender.is_bot
    assert not other.inbound.from_self


def test_a_reply_names_the_message_it_answers() -> None:
    converted = from_message(REPLY, IN_THREAD, ME, KNOWN)
    assert converted is not None
    assert converted.inbound.reply_to == "480"


def test_a_mention_moved_into_its_thread_answers_there_and_reacts_in_the_channel() -> None:
    converted = from_message(MENTION, IN_GENERAL, ME)
    assert converted is not None
    moved = in_thread(converted, IN_GENERAL, "500")  # the thread takes the message's id
    chat = moved.inbound.chat
    assert moved.inbound.key == f"discord:{GUILD}:{GENERAL}:500"
    assert (chat, moved.adopts, moved.opens_thread) == (ChatRef(GENERAL, "500"), True, False)
    assert posted_in(chat) == "500"
    assert reacted_in(chat, "500") == GENERAL  # the mention lives in the channel
    assert reacted_in(chat, "777") == "500"  # a later message lives in the thread
    assert reacted_in(ChatRef(POST), POST) == POST  # a forum post's first message is in it


@pytest.mark.parametrize(
    ("text", "mentioned", "cleaned"),
    [
        ("<@900> stop", True, "/stop"),
        ("<@900> please stop it now", True, "please stop it now"),
        ("<@900> new", True, "/new"),
        ("<@900> new tests for the parser", True, "new tests for the parser"),
        ("new", False, "new"),
        ("<@900>: cancel", True, "/cancel"),
        ("  <@!900>  hello  ", True, "hello"),
    ],
)
def test_clean_text(text: str, mentioned: bool, cleaned: str) -> None:
    assert clean_text(text, ME, mentioned=mentioned) == cleaned


def test_files_are_listed_by_kind_and_fetched_later() -> None:
    assert shared_files(FILES) == (
        SharedFile("https://cdn.discordapp.com/a/2", "image/png", 10, "image", "shot.png"),
        SharedFile("https://cdn.discordapp.com/a/3", "text/plain", 20, "file", "build.log"),
        SharedFile("https://cdn.discordapp.com/a/4", "audio/mpeg", None, "voice", "song.mp3"),
    )
    [voice] = shared_files(VOICE)
    assert (voice.kind, voice.name, voice.size) == ("voice", "voice-message.ogg", 4242)
    converted = from_message(VOICE, IN_DM, ME)
    assert converted is not None
    assert converted.inbound.text == ""


def test_keys_and_chats_of_places() -> None:
    assert conversation_key(IN_DM) == f"discord:@me:{DM}"
    assert conversation_key(IN_THREAD) == THREAD_KEY
    assert conversation_key(IN_POST) == POST_KEY
    assert chat_of(IN_THREAD) == ChatRef(GENERAL, THREAD)
    assert chat_of(IN_POST) == ChatRef(POST)


# --- interactions ----------------------------------------------------------------------

TOKEN = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDpfX3Rva2VuX18"
PRESS = fixture(f"""{{"id": "700", "type": 3, "application_id": "900", "token": "{TOKEN}",
  "data": {{"custom_id": "pi01:tok-ABC", "component_type": 2}},
  "member": {{"roles": ["7"], "user": {{"id": "100", "username": "alice"}}}},
  "message": {{"id": "650"}}}}""")
DM_PRESS = fixture(f"""{{"id": "701", "type": 3, "application_id": "900", "token": "{TOKEN}",
  "data": {{"custom_id": "pi00:tok-DM"}}, "user": {{"id": "101", "username": "bob"}},
  "message": {{"id": "651"}}}}""")
FOREIGN = fixture(f"""{{"id": "702", "type": 3, "application_id": "900", "token": "{TOKEN}",
  "data": {{"custom_id": "someone-elses"}}, "user": {{"id": "101", "username": "bob"}},
  "message": {{"id": "652"}}}}""")
ROW_SUBMIT = fixture(f"""{{"id": "703", "type": 5, "application_id": "900", "token": "{TOKEN}",
  "data": {{"custom_id": "pif:tok-ABC", "components": [{{"type": 1, "components": [
    {{"type": 4, "custom_id": "answer", "value": "those are the tests"}}]}}]}},
  "member": {{"roles": [], "user": {{"id": "100", "username": "alice"}}}},
  "message": {{"id": "650"}}}}""")
LABEL_SUBMIT = fixture(f"""{{"id": "704", "type": 5, "application_id": "900", "token": "{TOKEN}",
  "data": {{"custom_id": "pif:tok-ABC", "components": [{{"type": 18, "component":
    {{"type": 4, "custom_id": "answer", "value": "in a label"}}}}]}},
  "user": {{"id": "100", "username": "alice"}}}}""")
SLASH = fixture(f"""{{"id": "705", "type": 2, "application_id": "900", "token": "{TOKEN}",
  "data": {{"id": "1", "name": "later", "type": 1,
    "options": [{{"name": "text", "type": 3, "value": "run the tests"}}]}},
  "member": {{"roles": [], "user": {{"id": "100", "username": "alice"}}}}}}""")
START = fixture(f"""{{"id": "706", "type": 2, "application_id": "900", "token": "{TOKEN}",
  "data": {{"id": "2", "name": "pi", "type": 1,
    "options": [{{"name": "text", "type": 3, "value": "fix the build"}}]}},
  "user": {{"id": "100", "username": "alice"}}}}""")


def test_a_press_on_a_bridge_button() -> None:
    inbound = from_press(PRESS, IN_THREAD, ME)
    assert inbound is not None
    assert inbound.press is not None
    assert (inbound.key, inbound.event_id) == (THREAD_KEY, "discord:900:i700")
    assert inbound.press.token == "tok-ABC"
    assert inbound.press.message == MessageRef(ChatRef(GENERAL, THREAD), "650")
    assert parse_press_ref(inbound.press.press_id) == ("900", TOKEN)
    assert inbound.sender.groups == frozenset({"7"})
    in_dm = from_press(DM_PRESS, IN_DM, ME)
    assert in_dm is not None
    assert in_dm.key == f"discord:@me:{DM}"
    assert in_dm.sender.id == "101"


@pytest.mark.parametrize(
    "interaction",
    [FOREIGN, SLASH, ROW_SUBMIT, {"id": "1", "type": 3}, {"type": "three"}],
    ids=["another app's button", "a command", "a submission", "no data", "malformed"],
)
def test_what_is_no_press_of_the_bridge(interaction: dict[str, Any]) -> None:
    assert from_press(interaction, IN_THREAD, ME) is None


@pytest.mark.parametrize(
    ("interaction", "text"),
    [(ROW_SUBMIT, "those are the tests"), (LABEL_SUBMIT, "in a label")],
    ids=["in an action row", "in a label"],
)
def test_a_forms_submission_is_the_press_with_its_text(
    interaction: dict[str, Any], text: str
) -> None:
    inbound = from_submission(interaction, IN_THREAD, ME)
    assert inbound is not None
    assert inbound.press is not None
    assert (inbound.press.token, inbound.press.text) == ("tok-ABC", text)


def test_slash_commands_become_the_command_as_typed() -> None:
    later = from_command(SLASH, IN_THREAD, ME)
    assert later is not None
    assert (later.name, later.text, later.line) == (
        "later",
        "run the tests",
        "/later run the tests",
    )
    assert later.inbound.text == "/later run the tests"
    assert later.inbound.key == THREAD_KEY
    assert parse_press_ref(later.inbound.private_reply) == ("900", TOKEN)
    start = from_command(START, IN_GENERAL, ME)
    assert start is not None
    assert (start.name, start.inbound.text) == ("pi", "fix the build")
    assert from_command(PRESS, IN_THREAD, ME) is None


@pytest.mark.parametrize(
    ("custom_id", "token"),
    [
        (button_id(0, 0, "abc"), "abc"),
        (button_id(4, 4, "x:y"), "x:y"),
        ("pi5:abc", None),
        ("pif:abc", None),
        ("other", None),
    ],
)
def test_button_ids_carry_the_token(custom_id: str, token: str | None) -> None:
    assert token_of(custom_id) == token


def test_press_refs_round_trip_and_refuse_garbage() -> None:
    assert parse_press_ref(press_ref("900", "t/o/k")) == ("900", "t/o/k")
    assert parse_press_ref("not a ref") is None
    assert parse_press_ref("900/") is None

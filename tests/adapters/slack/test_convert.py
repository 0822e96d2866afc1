"""Slack payloads → Inbound: table-driven over payloads shaped like Slack's own
(Events API envelope bodies and `block_actions` payloads), no I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.slack.convert import (
    Identity,
    SharedFile,
    candidate_thread,
    clean_text,
    from_action,
    from_event,
    parse_press_ref,
    press_ref,
    shared_files,
)
from bridge.model import ChatRef, MessageRef

ME = Identity(team_id="T1", user_id="UBOT", bot_id="BBOT")
OWNED = frozenset({"slack:T1:C1:100.1"})


def envelope(event: dict[str, Any], event_id: str = "Ev1") -> dict[str, Any]:
    return {"team_id": "T1", "event_id": event_id, "type": "event_callback", "event": event}


def fixture(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text)
    return loaded


MENTION = fixture("""{"type": "app_mention", "user": "U1", "text": "<@UBOT> fix the build",
  "ts": "100.1", "channel": "C1", "team": "T1"}""")
MENTION_IN_THREAD = fixture("""{"type": "app_mention", "user": "U1", "text": "<@UBOT> look here",
  "ts": "200.2", "thread_ts": "200.1", "channel": "C1"}""")
THREAD_REPLY = fixture("""{"type": "message", "channel_type": "channel", "user": "U1",
  "text": "and also the tests", "ts": "100.5", "thread_ts": "100.1", "channel": "C1"}""")
OTHER_THREAD = fixture("""{"type": "message", "channel_type": "channel", "user": "U1",
  "text": "unrelated", "ts": "300.5", "thread_ts": "300.1", "channel": "C1"}""")
TOP_LEVEL = fixture("""{"type": "message", "channel_type": "channel", "user": "U1",
  "text": "hello channel", "ts": "400.1", "channel": "C1"}""")
DM = fixture("""{"type": "message", "channel_type": "im", "user": "U1", "text": "hi bot",
  "ts": "500.1", "channel": "D1"}""")
OWN = fixture("""{"type": "message", "channel_type": "channel", "user": "UBOT", "bot_id": "BBOT",
  "text": "working…", "ts": "100.6", "thread_ts": "100.1", "channel": "C1"}""")
OTHER_BOT = fixture("""{"type": "message", "subtype": "bot_message", "bot_id": "B2",
  "text": "deploy done", "ts": "100.7", "thread_ts": "100.1", "channel": "C1",
  "channel_type": "channel"}""")
EDITED = fixture("""{"type": "message", "subtype": "message_changed", "channel": "C1",
  "channel_type": "channel", "ts": "100.9",
  "message": {"type": "message", "user": "U1", "text": "fixed typo", "ts": "100.5",
              "thread_ts": "100.1", "edited": {"user": "U1", "ts": "100.9"}}}""")
MENTION_COPY = fixture("""{"type": "message", "channel_type": "channel", "user": "U1",
  "text": "<@UBOT> stop", "ts": "100.8", "thread_ts": "100.1", "channel": "C1"}""")
JOINED = fixture("""{"type": "message", "subtype": "channel_join", "user": "U1",
  "text": "<@U1> has joined", "ts": "100.4", "thread_ts": "100.1", "channel": "C1",
  "channel_type": "channel"}""")
DELETED = fixture("""{"type": "message", "subtype": "message_deleted", "channel": "C1",
  "channel_type": "channel", "ts": "100.9", "deleted_ts": "100.5",
  "previous_message": {"user": "U1", "text": "x", "ts": "100.5", "thread_ts": "100.1"}}""")
PHOTO = fixture("""{"type": "message", "subtype": "file_share", "channel_type": "im",
  "user": "U1", "text": "what is this?", "ts": "500.2", "channel": "D1",
  "user_profile": {"display_name": "alice", "real_name": "Alice A."},
  "files": [
    {"id": "F1", "mimetype": "image/png", "url_private": "https://files.example/F1",
     "url_private_download": "https://files.example/F1/download"},
    {"id": "F2", "mimetype": "application/pdf", "url_private": "https://files.example/F2"}
  ]}""")


@pytest.mark.parametrize(
    ("event", "key", "chat", "text", "private"),
    [
        pytest.param(
            MENTION,
            "slack:T1:C1:100.1",
            ChatRef("C1", "100.1"),
            "fix the build",
            "C1|U1|100.1",
            id="a top-level mention starts a thread",
        ),
        pytest.param(
            MENTION_IN_THREAD,
            "slack:T1:C1:200.1",
            ChatRef("C1", "200.1"),
            "look here",
            "C1|U1|200.1",
            id="a mention in a thread adopts the thread",
        ),
        pytest.param(
            THREAD_REPLY,
            "slack:T1:C1:100.1",
            ChatRef("C1", "100.1"),
            "and also the tests",
            "C1|U1|100.1",
            id="a reply in an owned thread",
        ),
        pytest.param(DM, "slack:T1:D1", ChatRef("D1"), "hi bot", "", id="a direct message"),
        pytest.param(
            PHOTO, "slack:T1:D1", ChatRef("D1"), "what is this?", "", id="a file share in a DM"
        ),
    ],
)
def test_messages_for_the_bridge_become_inbounds(
    event: dict[str, Any], key: str, chat: ChatRef, text: str, private: str
) -> None:
    """`private`: where a note for the sender alone goes (an ephemeral message in
    the thread; in a DM plain messages are already private)."""
    converted = from_event(envelope(event), ME, OWNED)
    assert converted is not None
    inbound = converted.inbound
    assert (inbound.key, inbound.chat, inbound.text) == (key, chat, text)
    assert inbound.sender.id == "U1"
    assert not inbound.from_self
    assert not inbound.sender.is_bot
    assert not inbound.is_edit
    assert inbound.event_id == "Ev1"
    assert inbound.message_id == event["ts"]  # where reactions go
    assert inbound.private_reply == private


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(OTHER_THREAD, id="a thread the bridge does not own"),
        pytest.param(TOP_LEVEL, id="channel chatter without a mention"),
        pytest.param(MENTION_COPY, id="the message copy of a mention in a thread"),
        pytest.param(JOINED, id="a channel join"),
        pytest.param(DELETED, id="a deletion"),
        pytest.param({"type": "reaction_added", "user": "U1"}, id="another event type"),
    ],
)
def test_other_events_are_not_for_the_bridge(event: dict[str, Any]) -> None:
    assert from_event(envelope(event), ME, OWNED) is None


@pytest.mark.parametrize(
    ("event", "reader"),
    [
        pytest.param(MENTION, "T1:U1", id="a mention: its writer"),
        pytest.param(THREAD_REPLY, "T1:U1", id="a reply in an owned thread: its writer"),
        pytest.param(DM, None, id="a DM: a stream there names nobody"),
        pytest.param(OWN, None, id="the bot's own message"),
        pytest.param(OTHER_BOT, None, id="another bot"),
    ],
)
def test_a_threads_chat_carries_whom_a_stream_there_is_for(
    event: dict[str, Any], reader: str | None
) -> None:
    converted = from_event(envelope(event), ME, OWNED)
    assert converted is not None
    assert converted.inbound.chat.reader == reader
    # Not part of the chat's identity: the conversation's lanes and keys stay one.
    assert converted.inbound.chat == ChatRef(
        converted.inbound.chat.chat_id, converted.inbound.chat.thread_id
    )


def test_the_bots_own_message_is_marked_from_self() -> None:
    converted = from_event(envelope(OWN), ME, OWNED)
    assert converted is not None
    assert converted.inbound.from_self


def test_another_bots_message_is_marked_as_a_bot() -> None:
    converted = from_event(envelope(OTHER_BOT), ME, OWNED)
    assert converted is not None
    assert converted.inbound.sender.is_bot
    assert not converted.inbound.from_self


def test_an_edit_is_marked_and_carries_the_new_text() -> None:
    converted = from_event(envelope(EDITED), ME, OWNED)
    assert converted is not None
    assert converted.inbound.is_edit
    assert converted.inbound.text == "fixed typo"
    assert converted.inbound.key == "slack:T1:C1:100.1"


def test_shared_files_are_listed_for_download_images_apart() -> None:
    converted = from_event(envelope(PHOTO), ME, OWNED)
    assert converted is not None
    assert converted.shared_files == (
        SharedFile("https://files.example/F1/download", "image/png"),
        SharedFile("https://files.example/F2", "application/pdf", kind="file"),
    )
    assert converted.inbound.sender.name == "alice"


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("<@UBOT> stop", "!stop"),
        ("<@UBOT>: stop now", "!stop now"),
        ("<@UBOT> new", "!new"),
        ("<@UBOT> help me fix the parser", "help me fix the parser"),
        ("<@UBOT|pi> status", "!status"),
        ("!stop", "!stop"),
        ("stop", "stop"),
        ("new", "new"),
        ("is a &lt; b &amp;&amp; c &gt; d?", "is a < b && c > d?"),
        ("see <https://example.com/x|example.com/x> please", "see https://example.com/x please"),
        ("ask <@U2> about it", "ask <@U2> about it"),
    ],
)
def test_message_text_reads_as_the_user_typed_it(raw: str, text: str) -> None:
    assert clean_text(raw, "UBOT") == text


ACTION = fixture("""{
  "type": "block_actions", "team": {"id": "T1"}, "trigger_id": "trig-1",
  "user": {"id": "U1", "username": "alice"},
  "container": {"type": "message", "message_ts": "100.3", "channel_id": "C1",
                "thread_ts": "100.1"},
  "channel": {"id": "C1", "name": "general"},
  "message": {"ts": "100.3", "thread_ts": "100.1", "user": "UBOT", "text": "Allow?"},
  "actions": [{"type": "button", "action_id": "pi_bridge:0.1", "block_id": "r0",
               "value": "tok-123", "action_ts": "100.35"}]}""")
DM_ACTION = fixture("""{
  "type": "block_actions", "team": {"id": "T1"}, "trigger_id": "trig-2",
  "user": {"id": "U1", "username": "alice"},
  "container": {"type": "message", "message_ts": "500.3", "channel_id": "D1"},
  "channel": {"id": "D1", "name": "directmessage"},
  "message": {"ts": "500.3", "user": "UBOT", "text": "Allow?"},
  "actions": [{"type": "button", "action_id": "pi_bridge:0.0", "value": "tok-9",
               "action_ts": "500.35"}]}""")


def test_a_button_press_carries_its_token_and_a_way_to_answer_the_presser() -> None:
    converted = from_action(ACTION, ME)
    assert converted is not None
    inbound = converted.inbound
    assert inbound.key == "slack:T1:C1:100.1"
    assert inbound.press is not None
    assert inbound.press.token == "tok-123"
    assert inbound.press.message == MessageRef(ChatRef("C1", "100.1"), "100.3")
    assert parse_press_ref(inbound.press.press_id) == ("C1", "U1", "100.1")
    assert inbound.event_id == "action:100.35"
    assert inbound.sender.id == "U1"


def test_a_press_in_a_dm_belongs_to_the_dm_conversation() -> None:
    converted = from_action(DM_ACTION, ME)
    assert converted is not None
    assert converted.inbound.key == "slack:T1:D1"
    assert converted.inbound.press is not None
    assert parse_press_ref(converted.inbound.press.press_id) == ("D1", "U1", "")


def test_a_press_on_someone_elses_button_is_ignored() -> None:
    foreign = {**ACTION, "actions": [{"action_id": "other_app", "value": "x"}]}
    assert from_action(foreign, ME) is None


def test_the_candidate_thread_names_the_key_a_reply_would_have() -> None:
    assert candidate_thread(envelope(OTHER_THREAD), ME) == "slack:T1:C1:300.1"
    assert candidate_thread(envelope(EDITED), ME) == "slack:T1:C1:100.1"
    assert candidate_thread(envelope(TOP_LEVEL), ME) is None
    assert candidate_thread(envelope(MENTION), ME) is None


def test_press_refs_round_trip_and_reject_garbage() -> None:
    assert parse_press_ref(press_ref("C1", "U1", "")) == ("C1", "U1", "")
    assert parse_press_ref("nonsense") is None


CLIP = {"id": "F7", "url_private_download": "https://files.example/F7", "name": "clip.webm"}


@pytest.mark.parametrize(
    ("file", "kind", "transcript"),
    [
        ({**CLIP, "mimetype": "audio/webm", "subtype": "slack_audio"}, "voice", ""),
        (
            {
                **CLIP,
                "mimetype": "audio/webm",
                "transcription": {"status": "complete", "preview": {"content": " Run it. "}},
            },
            "voice",
            "Run it.",
        ),
        (
            {
                **CLIP,
                "mimetype": "audio/webm",
                "transcription": {
                    "status": "complete",
                    "preview": {"content": "Run", "has_more": True},
                },
            },
            "voice",
            "",
        ),
        (
            {**CLIP, "mimetype": "audio/webm", "transcription": {"status": "processing"}},
            "voice",
            "",
        ),
        ({**CLIP, "mimetype": "video/mp4", "subtype": "slack_video"}, "file", ""),
        ({**CLIP, "mimetype": "text/plain"}, "file", ""),
    ],
    ids=[
        "a clip",
        "with slack's transcript",
        "a cut preview",
        "still transcribing",
        "video",
        "text",
    ],
)
def test_audio_clips_are_voice_with_slacks_whole_transcript_only(
    file: dict[str, object], kind: str, transcript: str
) -> None:
    [found] = shared_files({"files": [file]})
    assert (found.kind, found.transcript, found.name) == (kind, transcript, "clip.webm")

"""Fuzzing the Slack converters: any payload shaped like Slack's converts or is ignored.

The boundary's contract (adapters/malformed.py): `from_event`, `from_action`,
`from_submission` and `from_command` answer a value whose `Inbound` (or
`SlashTask`) holds the types it declares, or None ("not for the bridge", or a
payload of the wrong shape); `candidate_thread`, which the runner asks first,
answers a key or None. None of them raises into bolt's listeners. Realistic
payloads are built like Slack's own: Events API envelopes with `app_mention` and
`message` events (threads, DMs, subtypes, edits, files, other bots and the bot
itself, text with mentions, links and entities), `block_actions` presses on the
bridge's buttons and others', `view_submission`s of the bridge's modal (its
metadata written by `forms.modal` itself) and `/pi` commands. Then those, and the
fixtures of tests/adapters/slack/test_convert.py, get their fields dropped, swapped for
JSON of another type, or joined by extra fields; every body goes to every
converter, as a misrouted one would.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from adapters.slack.convert import (
    ACTION_PREFIX,
    Converted,
    Identity,
    SharedFile,
    candidate_thread,
    from_action,
    from_event,
    thread_key,
)
from adapters.slack.forms import ACTION_ID, BLOCK_ID, CALLBACK_ID, from_submission, modal
from adapters.slack.slash import SlashTask, as_inbound, from_command, root_text
from bridge.model import ButtonPress, ChatRef, Form, Inbound, MessageRef, Sender
from tests.adapters.slack.test_convert import (
    ACTION,
    DELETED,
    DM,
    DM_ACTION,
    EDITED,
    JOINED,
    MENTION,
    MENTION_IN_THREAD,
    OTHER_BOT,
    OWN,
    PHOTO,
    THREAD_REPLY,
    envelope,
)
from tests.support.fuzzing import (
    FUZZ,
    TEXT,
    assert_well_typed,
    mutated,
    ran,
    swaps,
)

ME = Identity(team_id="T1", user_id="UBOT", bot_id="BBOT")
CHANNELS = {"C1": "channel", "G1": "group", "D1": "im"}
ROOT = "1700000000.000100"  # the thread every generated reply is in
# Content subtypes, an edit, and subtypes that are not a person writing.
SUBTYPES = [None, "file_share", "thread_broadcast", "me_message", "message_changed"]
SUBTYPES += ["message_deleted", "channel_join", "channel_topic"]
# Pieces of message text as Slack escapes it (api.slack.com "Formatting text").
PIECES = [
    "<@UBOT>",
    "<@UBOT|pi>",
    "<@U2>",
    "stop",
    "!stop",
    "new",
    "help",
    "<https://example.com/a|example.com/a>",
    "<mailto:a@example.com|a>",
    "&lt;b&gt; &amp;",
    "<!here>",
    "/pi",
]


@st.composite
def texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(PIECES) | TEXT, max_size=5))
    return draw(st.sampled_from([" ", "", "\n"])).join(parts)


def stamp(draw: st.DrawFn) -> str:
    return f"{draw(st.integers(1_700_000_000, 1_800_000_000))}.{draw(st.integers(0, 999_999)):06d}"


@st.composite
def files(draw: st.DrawFn) -> list[dict[str, Any]]:
    found = []
    for n in range(draw(st.integers(1, 3))):
        mime = draw(st.sampled_from(["image/png", "image/jpeg", "application/pdf", ""]))
        file: dict[str, Any] = {"id": f"F{n}", "name": f"f{n}", "mimetype": mime}
        file["url_private"] = f"https://files.example/F{n}"
        if draw(st.booleans()):
            file["url_private_download"] = f"https://files.example/F{n}/download"
        if draw(st.booleans()):
            file["size"] = draw(st.integers(0, 50_000_000))
        found.append(file)
    return found


@st.composite
def authored(draw: st.DrawFn) -> dict[str, Any]:
    """A message's author and text: a person, the bot itself, or another bot."""
    who = draw(st.sampled_from(["person", "person", "self", "bot"]))
    message: dict[str, Any] = {"text": draw(texts())}
    if who == "person":
        message["user"] = "U1"
        if draw(st.booleans()):
            message["user_profile"] = {"display_name": "alice", "real_name": "Alice A."}
    elif who == "self":
        message |= {"user": "UBOT", "bot_id": "BBOT"}
    else:
        message |= {"subtype": "bot_message", "bot_id": "B2", "username": "helper"}
    return message


@st.composite
def events(draw: st.DrawFn) -> tuple[dict[str, Any], frozenset[str]]:
    """An Events API envelope body, and the threads the bridge owns."""
    channel = draw(st.sampled_from(sorted(CHANNELS)))
    event = draw(authored())
    event |= {"type": draw(st.sampled_from(["app_mention", "message"])), "channel": channel}
    event |= {"channel_type": CHANNELS[channel], "ts": stamp(draw), "event_ts": stamp(draw)}
    if draw(st.booleans()):
        event["thread_ts"] = ROOT
    subtype = draw(st.sampled_from(SUBTYPES))
    if subtype == "file_share" or (subtype is None and draw(st.integers(0, 3)) == 0):
        event["files"] = draw(files())
    if subtype == "message_changed":
        inner = {k: v for k, v in event.items() if k not in ("type", "channel", "channel_type")}
        event = {"type": "message", "subtype": subtype, "channel": channel, "hidden": True}
        event |= {"channel_type": CHANNELS[channel], "message": inner, "ts": stamp(draw)}
        event["previous_message"] = {"user": "U1", "text": "typo", "ts": inner["ts"]}
    elif subtype is not None:
        event["subtype"] = subtype
    body: dict[str, Any] = {"token": "t", "team_id": "T1", "api_app_id": "A1", "event": event}
    body |= {"type": "event_callback", "event_id": f"Ev{draw(st.integers(0, 99))}"}
    body["event_time"] = 1_700_000_000
    owned = frozenset({thread_key("T1", channel, ROOT)} if draw(st.booleans()) else ())
    return body, owned


@st.composite
def actions(draw: st.DrawFn) -> dict[str, Any]:
    """A `block_actions` payload: a press on one of the bridge's buttons (or another
    app's), in a thread, at the top of a channel, or in a DM."""
    channel = draw(st.sampled_from(sorted(CHANNELS)))
    ts = stamp(draw)
    container: dict[str, Any] = {"type": "message", "message_ts": ts, "channel_id": channel}
    message: dict[str, Any] = {"type": "message", "ts": ts, "user": "UBOT", "text": "Allow?"}
    if draw(st.booleans()):
        container["thread_ts"] = message["thread_ts"] = ROOT
    ours = {"type": "button", "block_id": "r0", "action_ts": stamp(draw)}
    ours |= {"action_id": f"{ACTION_PREFIX}0.{draw(st.integers(0, 3))}"}
    ours["value"] = draw(st.text(max_size=20))
    theirs = {"type": "button", "action_id": "other_app", "value": "x"}
    pressed = draw(st.sampled_from([[ours], [theirs], [theirs, ours]]))
    return {
        "type": "block_actions",
        "team": {"id": "T1", "domain": "team"},
        "user": {"id": "U1", "username": "alice", "name": "alice", "team_id": "T1"},
        "api_app_id": "A1",
        "trigger_id": "trig-1",
        "container": container,
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": "https://hooks.example/r",
        "actions": pressed,
    }


BAD_METADATA = ["", "{}", "[1]", "{not json", '{"key": "slack:T1:C1:1.0"}', '"text"']


@st.composite
def submissions(draw: st.DrawFn) -> dict[str, Any]:
    """A `view_submission` of the modal the bridge opened for a press (its metadata
    written by `forms.modal`), of another app's view, or with metadata gone bad."""
    chat = ChatRef(draw(st.sampled_from(sorted(CHANNELS))), draw(st.sampled_from([None, ROOT])))
    press = ButtonPress(draw(st.text(min_size=1, max_size=20)), "C1|U1|", MessageRef(chat, "1.2"))
    origin = Inbound(thread_key("T1", chat.chat_id, ROOT), chat, Sender("U1"), "e", press=press)
    form = Form(draw(TEXT), prefill=draw(TEXT), multiline=draw(st.booleans()))
    opened = modal(form, origin)
    assert opened is not None
    metadata = draw(st.sampled_from([opened["private_metadata"], *BAD_METADATA]))
    callback = draw(st.sampled_from([CALLBACK_ID, CALLBACK_ID, "other_view"]))
    value = draw(st.none() | TEXT)
    state = {"values": {BLOCK_ID: {ACTION_ID: {"type": "plain_text_input", "value": value}}}}
    view = {"id": "V1", "type": "modal", "callback_id": callback, "private_metadata": metadata}
    view["state"] = state
    return {
        "type": "view_submission",
        "team": {"id": "T1"},
        "user": {"id": "U1", "username": "alice"},
        "trigger_id": "trig-2",
        "view": view,
    }


@st.composite
def commands(draw: st.DrawFn) -> dict[str, Any]:
    """A `/pi` slash command as bolt hands it over (Slack posts it form-encoded: every
    field a string)."""
    channel = draw(st.sampled_from(sorted(CHANNELS)))
    return {
        "token": "t",
        "team_id": "T1",
        "team_domain": "team",
        "channel_id": channel,
        "channel_name": "general",
        "user_id": "U1",
        "user_name": "alice",
        "command": "/pi",
        "text": draw(texts()),
        "api_app_id": "A1",
        "is_enterprise_install": "false",
        "response_url": "https://hooks.example/c",
        "trigger_id": f"trig-{draw(st.integers(0, 9))}",
    }


# --- what each converter promises, whatever it was given ----------------------------------


def check_converted(converted: object) -> None:
    assert converted is None or isinstance(converted, Converted), converted
    if converted is not None:
        assert_well_typed(converted.inbound)
        for file in converted.shared_files:
            assert isinstance(file, SharedFile), file
            assert isinstance(file.url, str), file
            assert file.mime_type, file
            assert file.kind == ("image" if file.mime_type.startswith("image/") else "file"), file
            assert isinstance(file.name, str), file
            assert file.size is None or isinstance(file.size, int), file


def check_task(task: object) -> None:
    assert task is None or isinstance(task, SlashTask), task
    if task is not None:
        fields = (task.team, task.channel, task.user, task.user_name, task.text, task.delivery)
        assert all(isinstance(f, str) for f in fields), task
        assert isinstance(root_text(task), str)
        assert_well_typed(as_inbound(task, ROOT))


def check_all(body: dict[str, Any], owned: frozenset[str] = frozenset()) -> None:
    """Every converter on `body`, as a misrouted payload would reach it."""
    key = candidate_thread(body, ME)
    assert key is None or isinstance(key, str), key
    check_converted(from_event(body, ME, owned | ({key} if key else set())))
    check_converted(from_action(body, ME))
    check_converted(from_submission(body))
    check_task(from_command(body, ME))


# --- realistic payloads ---------------------------------------------------------------------


@FUZZ
@given(events())
def test_a_realistic_event_becomes_a_well_formed_inbound_or_is_ignored(
    case: tuple[dict[str, Any], frozenset[str]],
) -> None:
    ran("slack: realistic events")
    body, owned = case
    event = body["event"]
    converted = from_event(body, ME, owned)
    check_converted(converted)
    key = candidate_thread(body, ME)
    if event["type"] == "app_mention":
        assert converted is not None
        root = event.get("thread_ts") or event["ts"]
        assert converted.inbound.key == thread_key("T1", event["channel"], root)
    if converted is None:
        return
    inbound, message = converted.inbound, event.get("message") or event
    assert inbound.is_edit == (event.get("subtype") == "message_changed")
    assert inbound.from_self == (message.get("bot_id") == "BBOT")
    assert inbound.sender.is_bot == ("bot_id" in message)
    if event["type"] == "message" and event["channel_type"] != "im":
        # The runner asks `candidate_thread` which thread to look up: the same one.
        assert inbound.key == key


@FUZZ
@given(actions())
def test_a_realistic_press_is_on_the_bridges_button_or_ignored(body: dict[str, Any]) -> None:
    ran("slack: realistic presses")
    converted = from_action(body, ME)
    check_converted(converted)
    ours = [a for a in body["actions"] if a["action_id"].startswith(ACTION_PREFIX)]
    assert (converted is not None) == bool(ours)
    if converted is not None:
        assert converted.inbound.press is not None
        assert converted.inbound.press.token == ours[0]["value"]
        assert converted.inbound.event_id == f"action:{ours[0]['action_ts']}"


@FUZZ
@given(submissions())
def test_a_realistic_submission_answers_the_press_its_modal_was_opened_for(
    body: dict[str, Any],
) -> None:
    ran("slack: realistic submissions")
    converted = from_submission(body)
    check_converted(converted)
    view = body["view"]
    meta = view["private_metadata"]
    ours = view["callback_id"] == CALLBACK_ID and meta not in BAD_METADATA
    assert (converted is not None) == ours
    if converted is not None:
        press = converted.inbound.press
        assert press is not None
        assert press.token == json.loads(meta)["token"]
        assert press.text == (view["state"]["values"][BLOCK_ID][ACTION_ID]["value"] or "")


@FUZZ
@given(commands())
def test_a_realistic_command_is_a_task_or_asks_for_the_usage(body: dict[str, Any]) -> None:
    ran("slack: realistic commands")
    task = from_command(body, ME)
    check_task(task)
    if task is not None:
        assert task.text.strip()
        assert task.delivery == f"command:{body['trigger_id']}"


# --- payloads of the wrong shape ------------------------------------------------------------

SAMPLES: list[dict[str, Any]] = [
    *(envelope(e) for e in (MENTION, MENTION_IN_THREAD, THREAD_REPLY, DM, OWN, OTHER_BOT)),
    *(envelope(e) for e in (EDITED, JOINED, DELETED, PHOTO)),
    ACTION,
    DM_ACTION,
]
REALISTIC = events().map(lambda case: case[0]) | actions() | submissions() | commands()


@FUZZ
@given(st.sampled_from(SAMPLES).flatmap(mutated) | REALISTIC.flatmap(mutated))
# Found by this suite: an event whose `message` is not an object escaped
# `candidate_thread` (which the runner calls before converting) as an AttributeError.
@example({"event": {"type": "message", "message": "x"}})
@example({"event": []})
@example({"event": {"type": "message", "text": None}})
@example({"actions": [{"action_id": "pi_bridge:0", "value": 1}], "channel": {"id": []}})
# Found by this suite: a user id of another type (here -1) reached the Inbound.
@example(envelope({"type": "app_mention", "text": "hi", "ts": "1.2", "channel": "C1", "user": -1}))
# A press in a DM whose only thread_ts is 0 (falsy, not a string): no ChatRef thread id 0.
@example({**DM_ACTION, "container": {**DM_ACTION["container"], "thread_ts": 0}})
def test_a_payload_of_the_wrong_shape_is_ignored_without_raising(body: dict[str, Any]) -> None:
    ran("slack: mutated payloads")
    check_all(body)


def test_every_field_of_a_real_payload_dropped_or_swapped_alone_is_handled() -> None:
    for sample in SAMPLES:
        for body in swaps(sample):
            ran("slack: single-field swaps")
            try:
                check_all(body, frozenset({"slack:T1:C1:100.1"}))
            except Exception as exc:
                raise AssertionError(repr(body)) from exc


def test_a_submission_whose_metadata_nests_past_the_recursion_limit_is_ignored() -> None:
    view = {"callback_id": CALLBACK_ID, "private_metadata": "[" * 1_500 + "]" * 1_500}
    assert from_submission({"user": {"id": "U1"}, "view": view}) is None


def test_a_submission_whose_metadata_names_a_thread_of_another_type_is_ignored() -> None:
    meta = {"key": "slack:T1:C1:1.0", "token": "tok", "channel": "C1", "thread": [1]}
    view = {"callback_id": CALLBACK_ID, "private_metadata": json.dumps(meta)}
    assert from_submission({"user": {"id": "U1"}, "view": view}) is None

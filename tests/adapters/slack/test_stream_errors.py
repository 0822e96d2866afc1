"""Slack's answers to the stream methods as the bridge's errors, and whom a stream in a
thread is for: the pure parts of the Slack adapter's streaming (`map_error`,
`Recipients`)."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from adapters.slack.failures import map_error
from adapters.slack.recipients import Recipients
from bridge.model import ChatRef, Inbound, Sender
from bridge.platform import PlatformError, RateLimited, StreamEnded


def refusal(error: str, status: int = 200) -> SlackApiError:
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.com/api/chat.appendStream",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    return SlackApiError(error, response)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("message_not_in_streaming_state", StreamEnded),
        ("stopped_by_user", StreamEnded),
        ("missing_scope", PlatformError),
        ("unknown_method", PlatformError),
        ("ratelimited", RateLimited),
    ],
)
def test_stream_refusals_map_to_the_bridge_errors(error: str, kind: type[Exception]) -> None:
    assert type(map_error(refusal(error), "formatted")) is kind


def test_a_threads_first_person_is_its_streams_recipient() -> None:
    recipients = Recipients(capacity=2)
    thread = ChatRef("C1", thread_id="1.0")

    def said(user: str, chat: ChatRef = thread, *, is_bot: bool = False) -> Inbound:
        sender = Sender(user, is_bot=is_bot)
        return Inbound(f"slack:T1:{chat.chat_id}:{chat.thread_id}", chat, sender, "e")

    recipients.note(said("U0BOT", is_bot=True))
    assert recipients.of(thread) is None  # a bot is nobody to stream to
    recipients.note(said("U0ALICE"))
    recipients.note(said("U0BOB"))
    assert recipients.of(thread) == ("T1", "U0ALICE")
    recipients.note(said("U1", ChatRef("C2", thread_id="2.0")))
    recipients.note(said("U2", ChatRef("C3", thread_id="3.0")))
    assert recipients.of(thread) is None  # bounded: the oldest thread is forgotten

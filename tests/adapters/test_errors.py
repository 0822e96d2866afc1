"""Platform errors become the bridge's `PlatformError` kinds: the shared matching of
`adapters.errors`, then each adapter's table through its own SDK's exceptions.

Everything here is pure: SDK exceptions are built by hand, no server is involved
(tests/adapters/telegram/test_adapter.py and tests/adapters/slack/test_adapter.py go over the wire).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TimedOut

from adapters import errors
from adapters.slack.failures import DEFAULT_RETRY_AFTER, map_error
from adapters.telegram.adapter import platform_errors, retry_seconds
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    TooLong,
    TransientError,
)

# --- the shared matching ----------------------------------------------------------------

TABLE: errors.Rules = (
    *errors.rules(NotModified, "not modified"),
    *errors.rules(MessageGone, "not found", "gone"),
    *errors.rules(TooLong, "too long"),
    *errors.rules(TransientError, "not"),  # shadowed for texts an earlier rule matches
)


@pytest.mark.parametrize(
    ("text", "whole", "expected"),
    [
        ("Message is not modified: same text", False, NotModified),
        ("MESSAGE TO EDIT NOT FOUND", False, MessageGone),
        ("message is gone", False, MessageGone),
        ("text is too long", False, TooLong),
        ("not modified, not found", False, NotModified),  # the first rule wins
        ("nothing matches", False, TransientError),  # "not" is a fragment of "nothing"
        ("chat was deleted", False, PlatformError),
        ("", False, PlatformError),
        ("gone", True, MessageGone),
        ("not found", True, MessageGone),
        ("message is gone", True, PlatformError),  # whole: fragments do not count
        ("GONE", True, PlatformError),  # whole: codes are matched exactly
        ("", True, PlatformError),
    ],
)
def test_classify_finds_the_first_matching_rule(
    text: str, whole: bool, expected: type[PlatformError]
) -> None:
    assert errors.classify(text, TABLE, whole=whole) is expected


def test_classify_falls_back_to_the_default_kind() -> None:
    assert errors.classify("unknown", TABLE, default=TransientError) is TransientError
    assert errors.classify("anything", ()) is PlatformError


@pytest.mark.parametrize(
    "kind", [PlatformError, NotModified, BadFormatting, MessageGone, TooLong, TransientError]
)
def test_error_makes_an_exception_of_the_kind_with_the_message(
    kind: type[PlatformError],
) -> None:
    made = errors.error(kind, "what the platform said")
    assert type(made) is kind
    assert str(made) == "what the platform said"


def test_a_rate_limit_error_carries_its_wait_not_the_message() -> None:
    made = errors.error(RateLimited, "ratelimited", retry_after=7.5)
    assert isinstance(made, RateLimited)
    assert made.retry_after == 7.5
    fallback = errors.error(RateLimited, "")
    assert isinstance(fallback, RateLimited)
    assert fallback.retry_after == errors.FALLBACK_RETRY_AFTER


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((7,), 7.0),
        ((2.5,), 2.5),
        (("30",), 30.0),
        ((b"4",), 4.0),
        ((timedelta(seconds=90),), 90.0),
        ((["12", "99"],), 12.0),  # a header's values: the first counts
        ((-3,), 0.0),  # never negative
        (("-1",), 0.0),
        (("soon", "5"), 5.0),  # the first readable value
        ((None, 6), 6.0),
        ((), 1.0),
        ((None,), 1.0),
        (("soon",), 1.0),
        (([],), 1.0),
        ((object(),), 1.0),
    ],
)
def test_retry_after_seconds_reads_the_first_readable_wait(
    values: tuple[object, ...], expected: float
) -> None:
    assert errors.retry_after_seconds(*values) == expected


def test_retry_after_seconds_falls_back_to_the_given_default() -> None:
    assert errors.retry_after_seconds("later", default=2.0) == 2.0
    assert errors.retry_after_seconds(default=0.5) == 0.5


# --- Telegram: Bot API descriptions through python-telegram-bot's exceptions -------------


def telegram_error(exc: Exception) -> PlatformError:
    with pytest.raises(PlatformError) as caught, platform_errors():
        raise exc
    assert caught.value.__cause__ is exc  # raised `from` the SDK's exception
    return caught.value


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        (
            "Bad Request: message is not modified: specified new message content and "
            "reply markup are exactly the same",
            NotModified,
        ),
        ("Bad Request: can't parse entities: character '.' is reserved", BadFormatting),
        ("Bad Request: can't find end of the entity starting at byte offset 4", BadFormatting),
        ("Bad Request: message to edit not found", MessageGone),
        ("Bad Request: message to delete not found", MessageGone),
        ("Bad Request: message can't be edited", MessageGone),
        ("Bad Request: message can't be deleted for everyone", MessageGone),
        ("Bad Request: query is too old and response timeout expired", MessageGone),
        ("Bad Request: message is too long", TooLong),
        ("Bad Request: MESSAGE_TOO_LONG", TooLong),
        ("Bad Request: message caption is too long", TooLong),
        ("Bad Request: chat not found", PlatformError),
        ("Bad Request: BUTTON_DATA_INVALID", PlatformError),
    ],
)
def test_telegram_bad_requests_become_their_kind(
    description: str, expected: type[PlatformError]
) -> None:
    made = telegram_error(BadRequest(description))
    assert type(made) is expected
    assert str(made) == BadRequest(description).message  # PTB's rewording, kept whole


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (NetworkError("connection reset"), TransientError),
        (TimedOut(), TransientError),
        (Forbidden("Forbidden: bot was blocked by the user"), PlatformError),
        (ChatMigrated(-100123), PlatformError),
    ],
    ids=["network", "timed out", "forbidden", "chat migrated"],
)
def test_telegram_errors_besides_bad_requests_become_their_kind(
    exc: Exception, expected: type[PlatformError]
) -> None:
    assert type(telegram_error(exc)) is expected


@pytest.mark.parametrize(
    ("retry_after", "seconds"), [(7, 7.0), (timedelta(seconds=3), 3.0), (0, 0.0)]
)
def test_a_telegram_429_is_rate_limited_for_its_retry_after(
    retry_after: int | timedelta, seconds: float
) -> None:
    exc = RetryAfter(retry_after)
    assert retry_seconds(exc) == seconds
    made = telegram_error(exc)
    assert isinstance(made, RateLimited)
    assert made.retry_after == seconds


def test_a_telegram_error_outside_the_sdk_is_left_alone() -> None:
    with pytest.raises(KeyError), platform_errors():
        raise KeyError("a bug, not a platform error")


# --- Slack: Web API error codes and HTTP statuses through slack_sdk's exception ----------


def slack_error(
    error: str | None, status: int = 200, *, headers: dict[str, Any] | None = None
) -> SlackApiError:
    """Slack's answer as slack_sdk raises it; no `error`: a body without one (an HTML
    page in front of Slack is covered over the wire in tests/adapters/slack/test_adapter.py)."""
    data = {"ok": False, "error": error} if error is not None else {}
    response = AsyncSlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.test/api/chat.postMessage",
        req_args={},
        data=data,
        headers=headers or {},
        status_code=status,
    )
    return SlackApiError(f"The request failed: {error}", response)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("error", "status", "markup", "expected", "message"),
    [
        ("internal_error", 200, "plain", TransientError, "internal_error"),
        ("fatal_error", 200, "plain", TransientError, "fatal_error"),
        ("service_unavailable", 200, "plain", TransientError, "service_unavailable"),
        ("request_timeout", 200, "plain", TransientError, "request_timeout"),
        ("message_not_found", 502, "plain", TransientError, "message_not_found"),  # status first
        (None, 503, "plain", TransientError, "HTTP 503"),
        ("message_not_found", 200, "plain", MessageGone, "message_not_found"),
        ("cant_update_message", 200, "plain", MessageGone, "cant_update_message"),
        ("cant_delete_message", 200, "plain", MessageGone, "cant_delete_message"),
        ("cant_delete_file", 200, "plain", MessageGone, "cant_delete_file"),
        ("file_not_found", 200, "plain", MessageGone, "file_not_found"),
        ("file_deleted", 200, "plain", MessageGone, "file_deleted"),
        ("edit_window_closed", 200, "plain", MessageGone, "edit_window_closed"),
        ("thread_not_found", 200, "plain", MessageGone, "thread_not_found"),
        ("msg_too_long", 200, "plain", TooLong, "msg_too_long"),
        ("msg_blocks_too_long", 200, "formatted", TooLong, "msg_blocks_too_long"),
        ("too_many_blocks", 200, "plain", TooLong, "too_many_blocks"),
        ("invalid_blocks", 200, "formatted", BadFormatting, "invalid_blocks"),
        ("invalid_blocks_format", 200, "formatted", BadFormatting, "invalid_blocks_format"),
        ("invalid_markdown", 200, "formatted", BadFormatting, "invalid_markdown"),
        ("invalid_blocks", 200, "plain", TooLong, "invalid_blocks"),  # nothing to fall back to
        ("channel_not_found", 200, "plain", PlatformError, "channel_not_found"),
        ("not_in_channel", 200, "formatted", PlatformError, "not_in_channel"),
        ("MSG_TOO_LONG", 200, "plain", PlatformError, "MSG_TOO_LONG"),  # codes match exactly
        (None, 405, "plain", PlatformError, "HTTP 405"),
    ],
)
def test_slack_errors_become_their_kind(
    error: str | None, status: int, markup: str, expected: type[PlatformError], message: str
) -> None:
    made = map_error(slack_error(error, status), markup)  # type: ignore[arg-type]
    assert type(made) is expected
    assert str(made) == message


@pytest.mark.parametrize(
    ("error", "status", "headers", "seconds"),
    [
        ("ratelimited", 429, {"Retry-After": "7"}, 7.0),
        ("ratelimited", 200, {"retry-after": "3"}, 3.0),  # the code alone says so
        (None, 429, {"RETRY-AFTER": ["2", "9"]}, 2.0),
        ("ratelimited", 503, {"Retry-After": "4"}, 4.0),  # a rate limit beats a 5xx
        ("message_not_found", 429, {"Retry-After": "-5"}, 0.0),  # a 429 beats the code
        ("ratelimited", 429, {"Retry-After": "soon"}, DEFAULT_RETRY_AFTER),
        ("ratelimited", 429, {}, DEFAULT_RETRY_AFTER),
    ],
)
def test_a_slack_rate_limit_carries_its_retry_after(
    error: str | None, status: int, headers: dict[str, Any], seconds: float
) -> None:
    made = map_error(slack_error(error, status, headers=headers))
    assert isinstance(made, RateLimited)
    assert made.retry_after == seconds

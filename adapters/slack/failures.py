"""Slack Web API failures as the bridge's error tree (`bridge.platform.PlatformError`).

Error codes are matched whole (`adapters.errors.classify`); a 429 or 5xx status
decides first; transport failures are transient.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters import errors
from bridge.platform import (
    BadFormatting,
    MessageGone,
    PlatformError,
    RateLimited,
    StreamEnded,
    TooLong,
    TransientError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bridge.model import Markup

DEFAULT_RETRY_AFTER = 1.0

# Web API error codes → the bridge's error (matched whole by `adapters.errors.classify`;
# anything else is a plain PlatformError). A 429 or 5xx status decides first.
_ERRORS: errors.Rules = (
    *errors.rules(RateLimited, "ratelimited"),
    *errors.rules(
        TransientError, "internal_error", "fatal_error", "service_unavailable", "request_timeout"
    ),
    *errors.rules(
        MessageGone,
        "message_not_found",
        "cant_update_message",
        "cant_delete_message",
        "cant_delete_file",
        "file_not_found",
        "file_deleted",
        "edit_window_closed",
        "thread_not_found",
    ),
    # chat.appendStream / stopStream on a stream Slack ended (after ~5 min, or its
    # reader pressed Stop): the message stays, as an ordinary one.
    *errors.rules(StreamEnded, "message_not_in_streaming_state", "stopped_by_user"),
    *errors.rules(TooLong, "msg_too_long", "msg_blocks_too_long", "too_many_blocks"),
    *errors.rules(BadFormatting, "invalid_blocks", "invalid_blocks_format", "invalid_markdown"),
)


def map_error(exc: SlackApiError, markup: Markup = "plain") -> PlatformError:
    """One Web API error as the bridge's error tree."""
    response = exc.response
    # A proxy or an outage can answer with HTML, which slack_sdk leaves as a string.
    error = str(response.get("error") or "") if isinstance(response.data, dict) else ""
    status, kind = response.status_code, errors.classify(error, _ERRORS, whole=True)
    if status == 429:
        kind = RateLimited
    elif status >= 500 and kind is not RateLimited:
        kind = TransientError
    elif kind is BadFormatting and markup != "formatted":
        kind = TooLong  # plain text has nothing to fall back to: Slack refuses its size
    retry_after = _retry_after(response.headers) if kind is RateLimited else 0.0
    return errors.error(kind, error or f"HTTP {status}", retry_after=retry_after)


def _retry_after(headers: Any) -> float:
    """Slack's Retry-After header (any case); `DEFAULT_RETRY_AFTER` without one."""
    waits = (
        value for name, value in dict(headers or {}).items() if str(name).lower() == "retry-after"
    )
    return errors.retry_after_seconds(*waits, default=DEFAULT_RETRY_AFTER)


@contextlib.contextmanager
def translated(markup: Markup = "plain") -> Iterator[None]:
    try:
        yield
    except SlackApiError as exc:
        raise map_error(exc, markup) from exc
    except (TimeoutError, SlackClientError, aiohttp.ClientError, OSError) as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}") from exc

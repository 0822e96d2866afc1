"""Platform error texts as the bridge's `PlatformError` kinds: the matching, done once.

Each adapter keeps its platform's strings as a data table of `Rules`, each rule a
pattern and the kind it means, first match wins: fragments of Bot API error
descriptions for Telegram, Web API error codes for Slack. `classify` finds a text's
kind, `error` makes the exception, and `retry_after_seconds` reads a platform's
retry-after value as seconds to wait. Nothing here knows a platform or its SDK, and
no adapter imports another: each imports this module instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Final

from bridge.platform import PlatformError, RateLimited

Kind = type[PlatformError]
Rules = Sequence[tuple[str, Kind]]
FALLBACK_RETRY_AFTER: Final = 1.0  # seconds, when a rate limit names no readable wait


def rules(kind: Kind, *patterns: str) -> tuple[tuple[str, Kind], ...]:
    """One rule per pattern, all of `kind`: a table's rows for one kind."""
    return tuple((pattern, kind) for pattern in patterns)


def classify(
    text: str, table: Rules, *, whole: bool = False, default: Kind = PlatformError
) -> Kind:
    """The kind of the first rule of `table` matching `text`, else `default`.

    A pattern is a fragment found anywhere in the text, case-insensitively
    (descriptions are prose that SDKs reword and capitalize; patterns are lower
    case), or with `whole` the exact text (an error code is an identifier).
    """
    lowered = text.lower()
    for pattern, kind in table:
        if text == pattern if whole else pattern in lowered:
            return kind
    return default


def error(kind: Kind, message: str, *, retry_after: float = FALLBACK_RETRY_AFTER) -> PlatformError:
    """An exception of `kind` saying `message`; a `RateLimited` one carries `retry_after`."""
    return RateLimited(retry_after) if issubclass(kind, RateLimited) else kind(message)


def retry_after_seconds(*values: object, default: float = FALLBACK_RETRY_AFTER) -> float:
    """The first of `values` that reads as a wait, in seconds and never negative:
    a number, a numeric string (an HTTP header, or a list of a header's values: the
    first counts) or a timedelta (PTB with PTB_TIMEDELTA set). `default` if none does."""
    for value in values:
        seconds = _seconds(value[0] if isinstance(value, list | tuple) and value else value)
        if seconds is not None:
            return max(0.0, seconds)
    return default


def _seconds(value: object) -> float | None:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if not isinstance(value, int | float | str | bytes):
        return None
    try:
        return float(value)
    except ValueError:
        return None

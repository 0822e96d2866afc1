"""A platform payload of a shape the converters do not expect is ignored, loudly.

The converters read updates as the Bot API and Slack document them. A payload that
breaks those shapes (a field missing or of another type: a platform change, a proxy
in between, a forged webhook request) is not for the bridge: the converter answers
None, as for any update it does not take, and the log says what was wrong, instead
of an exception escaping into the update loop. The fuzz suite (tests/**/test_fuzz.py)
drives the converters with such payloads.

The runners go one step further for the updates they receive (`counting_malformed`,
`skip_unreadable`): one that the platform's library or a converter cannot read is
logged, counted as undecodable (`InboundHandler.undecodable`), and confirmed to the
platform like any other, so it is never delivered again: one bad update must not
stop the updates behind it, nor the bridge. The log names the failure, never the
payload's text (a person's message): a ValueError's message may quote the value it
refused, so only its type is logged above debug level.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# What reading a JSON value of the wrong shape raises: a missing key, a None or list
# where a mapping was expected, a non-numeric id, an empty list indexed.
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)
# The converters that refused a payload, while a runner reads one (`counting_malformed`).
_refused: ContextVar[list[str] | None] = ContextVar("refused", default=None)


def ignore_malformed(convert: Callable[P, R | None]) -> Callable[P, R | None]:
    """`convert`, answering None (and logging why) for a payload of the wrong shape."""

    @functools.wraps(convert)
    def tolerant(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return convert(*args, **kwargs)
        except SHAPE_ERRORS as exc:
            log.warning("ignored a malformed payload in %s: %s", convert.__name__, describe(exc))
            log.debug("the malformed payload's error in full", exc_info=exc)
            refused = _refused.get()
            if refused is not None:
                refused.append(convert.__name__)
            return None

    return tolerant


def describe(exc: BaseException) -> str:
    """The failure, without the payload's text: the type, and the message of the errors
    whose message is about the expected shape (a missing key, a wrong type)."""
    if isinstance(exc, SHAPE_ERRORS) and not isinstance(exc, ValueError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__


@contextlib.contextmanager
def counting_malformed(count: Callable[[], None]) -> Iterator[None]:
    """While one received payload is read: if any converter refused it as malformed,
    `count` is called once (the payload is undecodable, and skipped)."""
    refused: list[str] = []
    token = _refused.set(refused)
    try:
        yield
    finally:
        _refused.reset(token)
        if refused:
            count()


def skip_unreadable(what: str, exc: BaseException, count: Callable[[], None]) -> None:
    """`what` (e.g. "telegram update 17") could not be read at all: logged and counted;
    the caller confirms it to the platform and goes on."""
    log.warning("%s could not be read and is skipped: %s", what, describe(exc))
    log.debug("%s could not be read", what, exc_info=exc)
    count()

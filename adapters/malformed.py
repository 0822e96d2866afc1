"""A platform payload of a shape the converters do not expect is ignored, loudly.

The converters read updates as the Bot API and Slack document them. A payload that
breaks those shapes (a field missing or of another type: a platform change, a proxy
in between, a forged webhook request) is not for the bridge: the converter answers
None, as for any update it does not take, and the log says what was wrong, instead
of an exception escaping into the update loop. The fuzz suite (tests/**/test_fuzz.py)
drives the converters with such payloads.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# What reading a JSON value of the wrong shape raises: a missing key, a None or list
# where a mapping was expected, a non-numeric id, an empty list indexed.
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def ignore_malformed(convert: Callable[P, R | None]) -> Callable[P, R | None]:
    """`convert`, answering None (and logging why) for a payload of the wrong shape."""

    @functools.wraps(convert)
    def tolerant(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return convert(*args, **kwargs)
        except SHAPE_ERRORS as exc:
            log.warning("ignored a malformed payload in %s: %r", convert.__name__, exc)
            return None

    return tolerant

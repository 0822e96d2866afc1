"""discord.py's failures as the bridge's error tree (`bridge.platform.PlatformError`).

Discord answers an error with an HTTP status and a JSON error code
(topics/opcodes-and-status-codes#json): the code decides. discord.py retries a 429
itself after its `retry_after`, pacing each route by its X-RateLimit headers as it
goes (topics/rate-limits); a 429 reaches here only once it has given up (after five
tries, or a wait over its `max_ratelimit_timeout`), and the outbox then waits the
`retry_after` Discord named. A missing permission (50013 Missing Permissions, 50001
Missing Access) is permanent and said once per channel, clearly, in the log: what
the bot may not do where, and which permission to grant; later ones only at debug.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import aiohttp
import discord

from adapters import errors
from bridge.platform import MessageGone, PlatformError, RateLimited, TooLong, TransientError

if TYPE_CHECKING:
    from collections.abc import Iterator

log = logging.getLogger(__name__)

# JSON error codes (topics/opcodes-and-status-codes#json).
UNKNOWN_CHANNEL = 10003
UNKNOWN_MESSAGE = 10008
UNKNOWN_WEBHOOK = 10015
UNKNOWN_INTERACTION = 10062
MISSING_ACCESS = 50001
MISSING_PERMISSIONS = 50013
INVALID_FORM_BODY = 50035
TOO_LARGE = 40005
THREAD_EXISTS = 160004
_GONE = frozenset({UNKNOWN_CHANNEL, UNKNOWN_MESSAGE, UNKNOWN_WEBHOOK, UNKNOWN_INTERACTION})
_NOT_ALLOWED = frozenset({MISSING_ACCESS, MISSING_PERMISSIONS})
# The permissions a bot needs where it works, by their bits (topics/permissions).
PERMISSIONS = {
    "View Channel": 1 << 10,
    "Send Messages": 1 << 11,
    "Send Messages in Threads": 1 << 38,
    "Create Public Threads": 1 << 35,
    "Read Message History": 1 << 16,
    "Attach Files": 1 << 15,
    "Add Reactions": 1 << 6,
}
ADMINISTRATOR = 1 << 3  # every permission
NEEDED = ", ".join(PERMISSIONS)


def missing(permissions: int) -> list[str]:
    """The permissions the bot needs that `permissions` lacks."""
    if permissions & ADMINISTRATOR:
        return []
    return [name for name, bit in PERMISSIONS.items() if not permissions & bit]


class MissingPermission(PlatformError):
    """Discord refused for lack of a permission: permanent, said once per channel."""


class Told:
    """Channels whose missing permission was said already (in this process)."""

    def __init__(self) -> None:
        self._said: set[tuple[str, int]] = set()

    def first(self, channel: str, code: int) -> bool:
        if (channel, code) in self._said:
            return False
        self._said.add((channel, code))
        return True


def map_error(exc: discord.HTTPException, what: str, channel: str, told: Told) -> PlatformError:
    """One refusal of `what` in `channel` as the bridge's error."""
    code, status = exc.code, exc.status
    if status == 429:
        return RateLimited(_retry_after(exc))
    if code in _NOT_ALLOWED:
        message = (
            f"Discord refused to {what} in channel {channel}: {exc.text or 'Missing Permissions'} "
            f"({code}). Give the bot's role these permissions there: {NEEDED}"
        )
        if told.first(channel, code):
            log.warning("%s", message)
        else:
            log.debug("%s", message)
        return MissingPermission(message)
    if code in _GONE:
        return MessageGone(f"{what}: {exc.text} ({code})")
    if code == TOO_LARGE or (code == INVALID_FORM_BODY and "length" in exc.text.lower()):
        return TooLong(f"{what}: {exc.text} ({code})")
    if status >= 500:
        return TransientError(f"{what}: HTTP {status}")
    return PlatformError(f"{what}: {exc.text or f'HTTP {status}'} ({code})")


def _retry_after(exc: discord.HTTPException) -> float:
    """The wait of a 429 discord.py gave up on: its Retry-After header."""
    headers = getattr(exc.response, "headers", None) or {}
    return errors.retry_after_seconds(headers.get("Retry-After"))


@contextlib.contextmanager
def translated(what: str, channel: str, told: Told) -> Iterator[None]:
    """Translate what discord.py raises while doing `what` in `channel`."""
    try:
        yield
    except discord.RateLimited as exc:
        raise RateLimited(exc.retry_after) from exc
    except discord.HTTPException as exc:
        raise map_error(exc, what, channel, told) from exc
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise TransientError(f"{what}: {type(exc).__name__}: {exc}") from exc
    except discord.DiscordException as exc:  # InteractionResponded, ClientException, …
        raise PlatformError(f"{what}: {exc}") from exc

"""Discord's REST rate limits in the fake (with `enforce_limits=True`).

As docs.discord.com/developers/topics/rate-limits describes them: every answer of a
limited route carries `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds),
`-Reset-After` (seconds, with decimals) and `-Bucket`; a call over a bucket is answered
429 with `{"message": "You are being rate limited.", "retry_after": <float s>,
"global": false}`, `Retry-After` and `X-RateLimit-Scope: user`. Per-route limits count
per top-level resource (the channel; a webhook's id and token), so two channels never
share a bucket. The global limit is 50 requests per second for a bot ("My Bot is Being
Rate Limited", support-dev.discord.com/hc/en-us/articles/6223003921559): over it, 429
with `"global": true`, `X-RateLimit-Global: true` and `X-RateLimit-Scope: global`.
Interaction callbacks and followups are not bound to the global limit (interactions/
receiving-and-responding: "Interaction endpoints are not bound to the bot's Global Rate
Limit").

Discord publishes no per-route figures ("rate limits should not be hard coded"): those in
`ROUTE_BUCKETS` are the ones bots observe in the headers (message create 5 per 5 s per
channel, reactions 1 per 0.25 s, …), and the fake's own where none is commonly reported
(marked). Each answer also carries `Via: 1.1 google`, as Discord's do: discord.py takes a
429 without it for a Cloudflare ban and gives up instead of waiting.

Windows are fixed: the first call opens one, `limit` calls fit in it, it ends `window`
seconds later. `scale` shrinks every window (and so every wait) for fast tests.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.support.fake_discord_checks import ApiError

if TYPE_CHECKING:
    from collections.abc import Callable

VIA = {"Via": "1.1 google"}
GLOBAL_LIMIT = 50  # requests …
GLOBAL_WINDOW = 1.0  # … per second
RATE_LIMITED = "You are being rate limited."


@dataclass(frozen=True)
class Bucket:
    name: str
    limit: int
    window: float  # seconds
    major: str = "channel_id"  # the route parameter the bucket is counted per

    @property
    def hash(self) -> str:
        """What X-RateLimit-Bucket says: opaque, stable, shared by the bucket's routes."""
        return hashlib.sha256(self.name.encode()).hexdigest()[:32]


_MESSAGES = "/channels/{channel_id}/messages"
_MESSAGE = _MESSAGES + "/{message_id}"
_REACTION = _MESSAGE + "/reactions/{emoji}/@me"
_WEBHOOK = "/webhooks/{webhook_id}/{webhook_token}"
_CREATE = Bucket("message-create", 5, 5.0)
_EDIT = Bucket("message-edit", 5, 5.0)
_REACT = Bucket("reaction", 1, 0.25)
_THREAD = Bucket("thread-create", 10, 10.0)  # the fake's figure
_WEBHOOK_BUCKET = Bucket("webhook", 5, 2.0, major="webhook_token")
ROUTE_BUCKETS: dict[tuple[str, str], Bucket] = {
    ("POST", _MESSAGES): _CREATE,
    ("PATCH", _MESSAGE): _EDIT,
    ("DELETE", _MESSAGE): Bucket("message-delete", 5, 1.0),
    ("PUT", _REACTION): _REACT,
    ("DELETE", _REACTION): _REACT,
    ("POST", "/channels/{channel_id}/typing"): Bucket("typing", 5, 5.0),
    ("POST", _MESSAGE + "/threads"): _THREAD,
    ("POST", "/channels/{channel_id}/threads"): _THREAD,
    ("POST", _WEBHOOK): _WEBHOOK_BUCKET,
    ("PATCH", _WEBHOOK + "/messages/{message_id}"): _WEBHOOK_BUCKET,
    ("DELETE", _WEBHOOK + "/messages/{message_id}"): _WEBHOOK_BUCKET,
}


@dataclass
class _Window:
    opened: float
    used: int = 0


class RateLimits:
    def __init__(self, clock: Callable[[], float], scale: float = 1.0) -> None:
        self.clock, self.scale = clock, scale
        self._windows: dict[tuple[str, str], _Window] = {}
        self._global: _Window | None = None

    def admit(self, method: str, route: str, params: dict[str, str]) -> dict[str, str]:
        """Count one call of `route` (its template); the headers its answer carries.
        Raises the 429 ApiError when a bucket (or the global limit) is spent."""
        if not route.startswith(("/interactions/", "/webhooks/")):
            self._admit_global()
        bucket = ROUTE_BUCKETS.get((method, route))
        if bucket is None:
            return {}
        now, window_length = self.clock(), bucket.window * self.scale
        key = (bucket.name, params.get(bucket.major, ""))
        window = self._windows.get(key)
        if window is None or now >= window.opened + window_length:
            window = self._windows[key] = _Window(now)
        reset_after = window.opened + window_length - now
        if window.used >= bucket.limit:
            headers = _headers(bucket, 0, reset_after)
            raise limited(reset_after, headers | {"X-RateLimit-Scope": "user"})
        window.used += 1
        return _headers(bucket, bucket.limit - window.used, reset_after)

    def _admit_global(self) -> None:
        now, length = self.clock(), GLOBAL_WINDOW * self.scale
        if self._global is None or now >= self._global.opened + length:
            self._global = _Window(now)
        if self._global.used >= GLOBAL_LIMIT:
            wait = self._global.opened + length - now
            headers = {"X-RateLimit-Global": "true", "X-RateLimit-Scope": "global"}
            raise limited(wait, headers, is_global=True)
        self._global.used += 1


def limited(retry_after: float, headers: dict[str, str], *, is_global: bool = False) -> ApiError:
    """Discord's 429 (topics/rate-limits#exceeding-a-rate-limit)."""
    retry_after = max(retry_after, 0.001)
    body = {"message": RATE_LIMITED, "retry_after": round(retry_after, 3), "global": is_global}
    headers = headers | {"Retry-After": str(math.ceil(retry_after))}
    return ApiError(429, 0, RATE_LIMITED, headers=headers, body=body)


def _headers(bucket: Bucket, remaining: int, reset_after: float) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(bucket.limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
        "X-RateLimit-Reset-After": f"{reset_after:.3f}",
        "X-RateLimit-Bucket": bucket.hash,
    }

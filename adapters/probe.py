"""One request to a platform's API, for `pi-bridge check` (each runner's `check`).

Plain aiohttp rather than the platform's SDK: the check reads the answer's headers
too (Slack's `x-oauth-scopes`, case-insensitive as aiohttp keeps them), and an
error names what failed without the credential, which Telegram puts in the URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp

if TYPE_CHECKING:
    from collections.abc import Mapping

TIMEOUT = 30.0  # s; `pi-bridge check` gives each check as long


async def post_json(
    url: str, secret: str, **kwargs: object
) -> tuple[dict[str, object], Mapping[str, str]]:
    """The JSON body of a POST to `url`, and the answer's headers; `secret` is
    starred out of any error's message."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session,
            session.post(url, **kwargs) as response,  # type: ignore[arg-type]
        ):
            body = await response.json(content_type=None)
            headers = response.headers
    except (aiohttp.ClientError, ValueError) as exc:
        # Telegram puts the token in the URL, and client errors quote URLs.
        raise RuntimeError(str(exc).replace(secret, "***")) from None
    if not isinstance(body, dict):
        raise RuntimeError(f"unexpected answer (HTTP {response.status})")
    return body, headers

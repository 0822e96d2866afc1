"""A file a person sent, fetched from Discord's CDN once the bridge admitted its message.

An attachment's URL is signed by Discord and needs no token (reference#signed-
attachment-cdn-urls), so nothing secret goes with the request; still, only Discord's
own file hosts (https) or the API's own origin (a self-hosted gateway, the tests'
fake) are asked: a URL elsewhere gets no request at all. The body is read no
further than the cap.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import aiohttp

from bridge.files.attachments import too_large
from bridge.model import AttachmentRefused

log = logging.getLogger(__name__)

CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
DOWNLOAD_TIMEOUT = 60.0  # s for one file at a slow few MB/s
CHUNK = 64 * 1024


def may_fetch(url: str, api_url: str) -> bool:
    """Whether `url` is on Discord's file hosts (https), or the API's own origin."""
    try:
        target, api = urlsplit(url), urlsplit(api_url)
    except ValueError:
        return False
    if target.scheme == "https" and target.hostname in CDN_HOSTS and not target.port:
        return True
    return bool(target.netloc) and (target.scheme, target.netloc) == (api.scheme, api.netloc)


async def download(url: str, api_url: str, cap: int) -> bytes:
    """The file at `url`, at most `cap` bytes; `AttachmentRefused` says why not."""
    if not may_fetch(url, api_url):
        log.warning("not fetching a file off Discord's hosts: %s", urlsplit(url).netloc)
        raise AttachmentRefused("it is not on Discord's file servers")
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)
    data = bytearray()
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url) as response,
        ):
            if response.status != 200:
                log.warning("file download refused: HTTP %s", response.status)
                raise AttachmentRefused(f"Discord would not hand it over (HTTP {response.status})")
            if response.content_length is not None and response.content_length > cap:
                raise too_large(cap, response.content_length)
            async for chunk in response.content.iter_chunked(CHUNK):
                data += chunk
                if len(data) > cap:
                    raise too_large(cap)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        log.warning("file download failed: %s", type(exc).__name__)
        raise AttachmentRefused("it could not be fetched from Discord") from exc
    return bytes(data)

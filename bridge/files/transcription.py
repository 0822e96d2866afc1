"""Voice to text through an OpenAI-compatible transcription endpoint.

`POST <url>` as multipart form data (`file`: the clip with its name and type, `model`),
with `Authorization: Bearer <key>` when a key is configured; the answer's `text` is the
transcript. Hosted services and local whisper servers speak this API
(platform.openai.com/docs/api-reference/audio/createTranscription). A URL without a
path gets `/v1/audio/transcriptions`. Every failure is `TranscriptionFailed`, with a
reason fit to show the sender; the key is never logged or shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

if TYPE_CHECKING:
    from bridge.options import Transcription

TIMEOUT = 120.0  # a minute-long clip on a slow local model
PATH = "/v1/audio/transcriptions"


class TranscriptionFailed(Exception):
    """The clip could not be transcribed; the message says why."""


def endpoint(url: str) -> str:
    """`url`, with the API's path when it names only a server."""
    return url.rstrip("/") + PATH if urlsplit(url).path in ("", "/") else url


def headers(service: Transcription) -> dict[str, str]:
    """The bearer key, when one is configured."""
    return {"Authorization": f"Bearer {service.key}"} if service.key else {}


async def transcribe(service: Transcription, name: str, data: bytes, mime: str) -> str:
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            response = await client.post(
                endpoint(service.url),
                headers=headers(service),
                data={"model": service.model, "response_format": "json"},
                files={"file": (name, data, mime)},
            )
    except httpx.HTTPError as exc:
        raise TranscriptionFailed(
            f"the transcription service did not answer ({type(exc).__name__})"
        ) from exc
    if response.status_code != httpx.codes.OK:
        raise TranscriptionFailed(f"the transcription service answered HTTP {response.status_code}")
    try:
        text = response.json().get("text")
    except (ValueError, AttributeError) as exc:
        raise TranscriptionFailed("the transcription service's answer was not JSON") from exc
    if not isinstance(text, str) or not text.strip():
        raise TranscriptionFailed("the transcription was empty")
    return text.strip()

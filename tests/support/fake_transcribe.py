"""A fake OpenAI-compatible transcription service on 127.0.0.1.

`POST /v1/audio/transcriptions` checks the request as the real API does
(platform.openai.com/docs/api-reference/audio/createTranscription): multipart form data
with a `file` part (a name and the clip's bytes) and a `model` field, and the bearer
key when one is expected; a request without them gets the API's 400 / 401 error body.
It cannot listen, so it answers with the transcript the test set (`transcript`) and
keeps each clip it took (`clips`: name, content type, bytes, model) for the test to
inspect; a clip that is not Ogg (the container of Telegram's voice notes) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import BodyPartReader, web

from tests.support.loopback import serve_on_loopback

if TYPE_CHECKING:
    from types import TracebackType


@dataclass
class Clip:
    name: str
    content_type: str
    data: bytes
    model: str


@dataclass
class FakeTranscriber:
    transcript: str = ""
    key: str = "sk-test-transcribe"
    clips: list[Clip] = field(default_factory=list)
    port: int = 0  # once serving
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeTranscriber:
        app = web.Application()
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.key}":
            return _error(401, "Incorrect API key provided.")
        if not request.content_type.startswith("multipart/form-data"):
            return _error(400, "Could not parse multipart form")
        fields: dict[str, Any] = {}
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                return _error(400, "Could not parse multipart form")
            if part.name == "file":
                content_type = part.headers.get("Content-Type", "")
                fields["file"] = (part.filename or "", content_type, bytes(await part.read()))
            elif part.name:
                fields[part.name] = await part.text()
        if "file" not in fields or not fields["file"][0]:
            return _error(400, "you must provide a file with a name")
        if not fields.get("model"):
            return _error(400, "you must provide a model parameter")
        name, content_type, data = fields["file"]
        if not data.startswith(b"OggS"):
            return _error(400, "Invalid file format.")
        self.clips.append(Clip(name, content_type, data, fields["model"]))
        return web.json_response({"text": self.transcript})


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return web.json_response(body, status=status)

"""A git server over smart HTTP on 127.0.0.1 that asks for a password, as a forge does.

Each request is handed to git's own `git http-backend` as a CGI program, for the bare
repositories under `root`; it is answered only with basic auth naming `user` and
`token` (401 with a `WWW-Authenticate` challenge otherwise, which is what makes git
ask its credential helper). `seen` keeps every Authorization header that came, and
`refused` counts the requests turned away.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from aiohttp import web

from tests.support.loopback import serve_on_loopback

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType


@dataclass
class GitHttp:
    root: Path
    user: str = "x-access-token"
    token: str = "ghp-test-token"
    seen: list[str] = field(default_factory=list)
    refused: int = 0
    port: int = 0
    _runner: web.AppRunner | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    async def __aenter__(self) -> GitHttp:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{path:.*}", self._serve)
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

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get("Authorization", "")
        self.seen.append(given)
        wanted = "Basic " + base64.b64encode(f"{self.user}:{self.token}".encode()).decode()
        if given != wanted:
            self.refused += 1
            return web.Response(
                status=401, headers={"WWW-Authenticate": 'Basic realm="git"'}, text="no"
            )
        body = await request.read()
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "REMOTE_USER": self.user,  # receive-pack is served only to a known user
            "REQUEST_METHOD": request.method,
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query_string,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        if encoding := request.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = encoding
        done = await anyio.run_process(["git", "http-backend"], input=body, env=env, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        response = web.Response(body=payload)
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                response.set_status(int(value.strip().split()[0]))
            elif name:
                response.headers[name] = value.strip()
        return response

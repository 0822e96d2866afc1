"""A fake GitHub REST API on 127.0.0.1: the few pull-request endpoints /pr uses.

It speaks for one repository ("owner/name"), whose branches are those of a real bare
repository on disk (`bare`): a request is opened only from a branch pushed there, as
GitHub opens one only from a branch it has (422 "head: invalid" otherwise), and a
request's head commit is read from it, live. Every call must carry the bearer token
the test set (401 "Bad credentials" otherwise). What was asked is kept in `calls`;
the test sets what GitHub would have worked out (`merge`, `statuses`, `check_runs`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.support.loopback import serve_on_loopback

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType


@dataclass
class Pull:
    number: int
    head: str
    base: str
    title: str
    body: str
    state: str = "open"
    merged: bool = False
    mergeable: bool | None = True


@dataclass
class FakeGitHub:
    bare: Path
    repository: str = "acme/web"
    token: str = "ghp-test-token"
    pulls: list[Pull] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)  # method, path?query
    statuses: dict[str, list[str]] = field(default_factory=dict)  # commit → states
    check_runs: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeGitHub:
        app = web.Application(middlewares=[self._checked])
        base = f"/repos/{self.repository}"
        app.router.add_get(f"{base}/pulls", self._list)
        app.router.add_post(f"{base}/pulls", self._create)
        app.router.add_get(f"{base}/pulls/{{number}}", self._get)
        app.router.add_get(f"{base}/commits/{{sha}}/status", self._status)
        app.router.add_get(f"{base}/commits/{{sha}}/check-runs", self._check_runs)
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

    def branch_head(self, branch: str) -> str | None:
        done = subprocess.run(
            ["git", "-C", str(self.bare), "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip() or None

    @web.middleware
    async def _checked(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.calls.append((request.method, request.path_qs))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(401, "Bad credentials")
        response: web.StreamResponse = await handler(request)
        return response

    def _json(self, pull: Pull) -> dict[str, Any]:
        owner = self.repository.split("/")[0]
        return {
            "number": pull.number,
            "html_url": f"https://github.example/{self.repository}/pull/{pull.number}",
            "state": "closed" if pull.merged else pull.state,
            "merged": pull.merged,
            "mergeable": pull.mergeable,
            "title": pull.title,
            "body": pull.body,
            "head": {"ref": pull.head, "sha": self.branch_head(pull.head) or "", "label": owner},
            "base": {"ref": pull.base},
        }

    async def _list(self, request: web.Request) -> web.Response:
        owner, _, branch = request.query.get("head", "").partition(":")
        found = [p for p in reversed(self.pulls) if p.head == branch]
        if owner != self.repository.split("/")[0]:
            found = []
        return web.json_response([self._json(p) for p in found])

    async def _create(self, request: web.Request) -> web.Response:
        sent = await request.json()
        head, base = str(sent.get("head", "")), str(sent.get("base", ""))
        if not sent.get("title"):
            return _error(422, "Validation Failed", "title is missing")
        if self.branch_head(head) is None:
            return _error(422, "Validation Failed", "head: invalid")
        if any(p.head == head and p.state == "open" and not p.merged for p in self.pulls):
            return _error(422, "Validation Failed", f"A pull request already exists for {head}.")
        pull = Pull(len(self.pulls) + 1, head, base, str(sent["title"]), str(sent.get("body")))
        self.pulls.append(pull)
        return web.json_response(self._json(pull), status=201)

    async def _get(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        found = [p for p in self.pulls if p.number == number]
        return web.json_response(self._json(found[0])) if found else _error(404, "Not Found")

    async def _status(self, request: web.Request) -> web.Response:
        states = self.statuses.get(request.match_info["sha"], [])
        statuses = [{"state": s, "context": f"ci/{i}"} for i, s in enumerate(states)]
        overall = "pending" if not states else states[0]
        return web.json_response({"state": overall, "statuses": statuses})

    async def _check_runs(self, request: web.Request) -> web.Response:
        runs = self.check_runs.get(request.match_info["sha"], [])
        shown = [
            {"status": s, "conclusion": c, "name": f"run {i}"} for i, (s, c) in enumerate(runs)
        ]
        return web.json_response({"total_count": len(shown), "check_runs": shown})


def _error(status: int, message: str, detail: str = "") -> web.Response:
    body: dict[str, Any] = {"message": message}
    if detail:
        body["errors"] = [{"message": detail}]
    return web.json_response(body, status=status)

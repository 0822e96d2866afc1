"""GitHub's pull requests through its REST API, with httpx.

httpx rather than a GitHub SDK: it is already the bridge's (python-telegram-bot's
transport, and the transcription client), async with timeouts of its own, and the
five calls made here are plain JSON; an SDK (PyGithub is synchronous, githubkit pulls
in a generated client of the whole API) would add much for them. The API's base URL
is a setting: GitHub Enterprise serves it under `/api/v3`, and the tests a fake.

The token goes in the Authorization header and nowhere else; httpx logs a request's
method and URL only, and a refusal's message is GitHub's own `message` field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import httpx

from bridge.projects.forges import Checks, ForgeError, PullRequest

if TYPE_CHECKING:
    from bridge.projects.forges import ForgePlace

TIMEOUT = 20.0  # one API call; GitHub answers in well under a second when it is up
API_VERSION = "2022-11-28"


class GitHub:
    """One repository's pull requests on GitHub (or GitHub Enterprise)."""

    name = "GitHub"

    def __init__(self, place: ForgePlace, token: str | None) -> None:
        self._place = place
        self._owner = place.repository.split("/")[0]
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._headers = headers

    async def find(self, branch: str) -> PullRequest | None:
        params = {"head": f"{self._owner}:{branch}", "state": "all", "sort": "created"}
        found = await self._call("GET", "pulls", params=params)
        pulls = [p for p in found if isinstance(p, dict)] if isinstance(found, list) else []
        return _pull(pulls[0]) if pulls else None

    async def open(self, branch: str, base: str, title: str, body: str) -> PullRequest:
        sent = {"title": title, "body": body, "head": branch, "base": base}
        return _pull(await self._call("POST", "pulls", json=sent))

    async def get(self, number: int) -> PullRequest:
        return _pull(await self._call("GET", f"pulls/{number}"))

    async def checks(self, commit: str) -> Checks:
        """The commit's statuses and check runs, summed up as GitHub's merge box does."""
        status = await self._call("GET", f"commits/{commit}/status")
        runs = await self._call("GET", f"commits/{commit}/check-runs")
        states = [str(s.get("state")) for s in _list(status, "statuses")]
        for run in _list(runs, "check_runs"):
            if run.get("status") != "completed":
                states.append("pending")
            elif run.get("conclusion") in ("success", "neutral", "skipped"):
                states.append("success")
            else:
                states.append("failure")
        return _summed(states)

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self._place.api_url}/repos/{self._place.repository}/{path}"
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT, headers=self._headers) as client:
                response = await client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise ForgeError(f"GitHub could not be reached ({type(exc).__name__})") from exc
        if response.is_success:
            return response.json()
        raise ForgeError(_refused(response))


def _refused(response: httpx.Response) -> str:
    try:
        found = response.json()
    except ValueError:
        found = {}
    said = str(found.get("message", "")) if isinstance(found, dict) else ""
    errors = found.get("errors") if isinstance(found, dict) else None
    if isinstance(errors, list):
        said += "".join(f"; {e.get('message', '')}" for e in errors if isinstance(e, dict))
    if response.status_code in (401, 403):
        return f"GitHub refused the token ({response.status_code}: {said or 'no access'})"
    if response.status_code == 404:
        return "GitHub has no such repository, or the token cannot see it (404)"
    return f"GitHub said {response.status_code}: {said or response.reason_phrase}"


def _list(found: Any, field: str) -> list[dict[str, Any]]:
    items = found.get(field) if isinstance(found, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _summed(states: list[str]) -> Checks:
    if not states:
        return "none"
    if any(s in ("failure", "error") for s in states):
        return "failing"
    if any(s == "pending" for s in states):
        return "pending"
    return "passing"


def _pull(found: Any) -> PullRequest:
    if not isinstance(found, dict) or not isinstance(found.get("number"), int):
        raise ForgeError("GitHub answered with no pull request")
    said = found.get("state")
    state: Literal["open", "closed", "merged"] = (
        "merged" if found.get("merged") or found.get("merged_at") else
        "closed" if said == "closed" else "open"
    )  # fmt: skip
    head = found.get("head")
    mergeable = found.get("mergeable")
    return PullRequest(
        number=found["number"],
        url=str(found.get("html_url", "")),
        state=state,
        head=str(head.get("sha", "")) if isinstance(head, dict) else "",
        mergeable=mergeable if isinstance(mergeable, bool) else None,
    )

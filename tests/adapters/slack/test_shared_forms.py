"""A press's form found by a frontend that did not post the question (a scale-out's
frontends share the forms they post, bridge/scale/forms.py)."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from bridge.model import Form

pytestmark = pytest.mark.anyio

WHY = Form("Why not?", multiline=True)


async def test_a_form_posted_elsewhere_is_found_through_the_shared_lookup() -> None:
    adapter = SlackAdapter(AsyncWebClient(token="xoxb-test", base_url="http://127.0.0.1:9/"))
    assert await adapter.find_form("tok") is None  # alone: only its own forms

    asked: list[str] = []

    async def elsewhere(token: str) -> Form | None:
        asked.append(token)
        return WHY if token == "tok" else None

    adapter.forms_elsewhere = elsewhere
    assert await adapter.find_form("tok") == WHY
    assert await adapter.find_form("other") is None
    assert asked == ["tok", "other"]

"""Fixtures of every Slack test: no proxy between slack_sdk and the fake on 127.0.0.1."""

from __future__ import annotations

import pytest

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # slack_sdk reads the proxy variables and ignores NO_PROXY
    # (docs/design.md, "Platform libraries").
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)

"""The pure parts of /pr: what a refused push says, which forge a remote is on, and a
title and description from the person's words or the agent's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.controls.pull_requests import from_agent, words
from bridge.options import ProjectOptions
from bridge.projects.forges import ForgePlace, host_and_path, place_of
from bridge.projects.push import push_message, refusal


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("GH006: Protected branch update failed for refs/heads/main.", "protected"),
        ("You are not allowed to push code to protected branches on this project.", "protected"),
        ("[remote rejected] pi/x -> pi/x (pre-receive hook declined)", "protected"),
        ("could not read Username for 'https://github.com': terminal prompts disabled", "access"),
        ("Authentication failed for 'https://github.com/acme/web.git/'", "access"),
        ("The requested URL returned error: 403", "access"),
        ("Permission denied (publickey).", "access"),
        ("Repository not found.", "access"),
        ("Could not resolve host: github.invalid", "unreachable"),
        ("Failed to connect to 127.0.0.1 port 9: Connection refused", "unreachable"),
        ("'/nowhere.git' does not appear to be a git repository", "unreachable"),
        ("something else entirely", "other"),
    ],
)
def test_a_refusal_is_told_by_its_kind(stderr: str, kind: str) -> None:
    assert refusal(stderr) == kind


@pytest.mark.parametrize(
    ("stderr", "porcelain", "said"),
    [
        (
            "remote: GH006: Protected branch update failed\nremote: \n"
            "error: failed to push some refs to 'x'",
            "To x\n!\tabc:refs/heads/pi/a\t[remote rejected] (pre-receive hook declined)\nDone",
            "GH006: Protected branch update failed; [remote rejected] (pre-receive hook declined)",
        ),
        ("fatal: Authentication failed for 'x'", "", "Authentication failed for 'x'"),
    ],
)
def test_a_refused_push_says_what_the_remote_said(stderr: str, porcelain: str, said: str) -> None:
    assert push_message(stderr, porcelain) == said


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("https://github.com/acme/web.git", ("github.com", "acme/web")),
        ("https://x-access-token@github.com/acme/web", ("github.com", "acme/web")),
        ("git@github.com:acme/web.git", ("github.com", "acme/web")),
        ("ssh://git@GitHub.com:22/acme/web.git", ("github.com", "acme/web")),
        ("https://gitlab.example/group/sub/web.git", ("gitlab.example", "group/sub/web")),
        ("/srv/git/web.git", None),
        ("./web.git", None),
        ("file:///srv/git/web.git", None),
    ],
)
def test_a_remote_urls_host_and_repository(url: str, found: tuple[str, str] | None) -> None:
    assert host_and_path(url) == found


@pytest.mark.parametrize(
    ("settings", "url", "place"),
    [
        ({}, "git@github.com:acme/web.git", ForgePlace("github", "https://api.github.com", "acme/web")),  # noqa: E501
        ({}, "https://gitlab.example/acme/web.git", None),
        ({}, "/srv/git/web.git", None),
        ({"forge": "github", "forge_api_url": "http://127.0.0.1:9/", "forge_repository": "a/b"},
         "/srv/git/web.git", ForgePlace("github", "http://127.0.0.1:9", "a/b")),
        ({"forge": "none"}, "https://github.com/acme/web", None),
        ({"forge": "github"}, "https://ghe.example/group/sub/web", None),  # not owner/name
    ],
)  # fmt: skip
def test_which_forge_a_projects_requests_go_to(
    settings: dict[str, str], url: str, place: ForgePlace | None
) -> None:
    project = ProjectOptions(path=Path("/r"), **settings)  # type: ignore[arg-type]
    assert place_of(project, url) == place


@pytest.mark.parametrize(
    ("arg", "found"),
    [
        ("Fix the login", ("Fix the login", "")),
        (
            "  Fix the login \n\nBecause it broke.\nTwice. ",
            ("Fix the login", "Because it broke.\nTwice."),
        ),
    ],
)
def test_the_persons_words_are_a_title_and_a_description(arg: str, found: tuple[str, str]) -> None:
    assert words(arg) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Add a greeting\n\nThe app now says hi.", ("Add a greeting", "The app now says hi.")),
        ("# Add a greeting\n\nBody", ("Add a greeting", "Body")),
        ("\n\nTitle: **Add a greeting**\nDescription: Body", ("Add a greeting", "Body")),
        ('"Add a greeting"', ("Add a greeting", "")),
        ("", ("", "")),
    ],
)
def test_the_agents_answer_is_a_title_and_a_description(text: str, found: tuple[str, str]) -> None:
    assert from_agent(text) == found

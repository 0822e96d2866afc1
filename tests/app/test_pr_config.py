"""/pr's settings in `[projects.<name>]`: read into the project's options, mistakes named,
and the push token's variable refused to the agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.app.config import ConfigError, load_config

if TYPE_CHECKING:
    from pathlib import Path

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}
WEB = '[projects.web]\npath = "/srv/web"\n'


def load(tmp_path: Path, toml: str, env: dict[str, str]) -> list[str] | object:
    (tmp_path / "pi-bridge.toml").write_text(toml, encoding="utf-8")
    try:
        return load_config({**ENV, **env}, cwd=tmp_path).options
    except ConfigError as exc:
        return exc.problems


def test_the_push_settings_reach_the_projects_options(tmp_path: Path) -> None:
    toml = WEB + (
        'remote = "https://github.com/acme/web.git"\nremote_token_env = "WEB_PUSH_TOKEN"\n'
        'forge = "github"\nforge_api_url = "https://ghe.example/api/v3"\n'
        'forge_repository = "acme/web"\n'
    )
    options = load(tmp_path, toml, {"WEB_PUSH_TOKEN": "t0ken"})
    project = options.projects["web"]  # type: ignore[attr-defined]
    assert (project.remote, project.remote_token_env, project.forge) == (
        "https://github.com/acme/web.git",
        "WEB_PUSH_TOKEN",
        "github",
    )
    assert (project.forge_api_url, project.forge_repository) == (
        "https://ghe.example/api/v3",
        "acme/web",
    )
    assert "t0ken" not in repr(options)  # the token is read at push time, never kept


def test_a_project_without_push_settings_pushes_to_origin_as_the_operator(tmp_path: Path) -> None:
    project = load(tmp_path, WEB, {}).projects["web"]  # type: ignore[attr-defined]
    assert (project.remote, project.remote_token_env, project.forge) == ("origin", "", None)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ('remote = "--upload-pack=x"\n', "projects.web.remote"),
        ('remote = ""\n', "projects.web.remote"),
        ('forge_repository = "just-a-name"\n', "projects.web.forge_repository"),
        ('forge = "sourceforge"\n', "projects.web.forge"),
    ],
)
def test_a_push_setting_mistake_is_named(tmp_path: Path, extra: str, named: str) -> None:
    found = load(tmp_path, WEB + extra, {})
    assert isinstance(found, list)
    assert any(named in problem for problem in found), found


def test_the_push_tokens_variable_is_refused_to_the_agent(tmp_path: Path) -> None:
    toml = '[agent]\nenv = ["WEB_PUSH_TOKEN"]\n' + WEB + 'remote_token_env = "WEB_PUSH_TOKEN"\n'
    found = load(tmp_path, toml, {"WEB_PUSH_TOKEN": "t0ken"})
    assert isinstance(found, list)
    assert any("push token WEB_PUSH_TOKEN" in problem for problem in found), found
    assert all("t0ken" not in problem for problem in found)

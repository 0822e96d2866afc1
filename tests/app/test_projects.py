"""Projects in the configuration: `[projects.<name>]` tables, a chat's `project`, and
`pi-bridge check` asking git whether each path is a repository.

Table-driven like test_config.py: good files and the options they become, broken ones
and the settings their errors must name. The check runs in-process against real
repositories made here (git with the user's configuration shut out), with an agent
command that does not exist, so the agent's line always fails and the projects' lines
are what differs between cases.
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge.app.check import check
from bridge.app.config import ConfigError, load_config
from bridge.options import ChatOptions, ProjectOptions

if TYPE_CHECKING:
    from bridge.app.config import Loaded

BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}
GIT_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def load(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> Loaded:
    (tmp_path / "pi-bridge.toml").write_text(toml, encoding="utf-8")
    return load_config({**BASE_ENV, **(env or {})}, cwd=tmp_path)


def problems(tmp_path: Path, toml: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, toml)
    return "\n".join(caught.value.problems)


EXAMPLE = """
[projects.web]
path = "/srv/web"
base = "main"
chats = ["slack:T1:C2", "tg:-100123"]
done_on_new = true

[projects."api.v2"]
path = "repos/api"

[chats."slack:T1:C2"]
project = "web"
verbosity = "compact"
"""


def test_projects_and_a_bound_chat_become_options(tmp_path: Path) -> None:
    options = load(tmp_path, EXAMPLE).options
    assert options.projects == {
        "web": ProjectOptions(
            path=Path("/srv/web"),
            base="main",
            chats=("slack:T1:C2", "tg:-100123"),
            done_on_new=True,
        ),
        # A relative path is taken from the working directory, like a chat's workspace.
        "api.v2": ProjectOptions(path=tmp_path / "repos" / "api"),
    }
    assert options.chats["slack:T1:C2"] == ChatOptions(project="web", verbosity="compact")


@pytest.mark.parametrize(
    ("key", "bound", "may_pick"),
    [
        ("slack:T1:C2:171.5", "web", ["web", "api.v2"]),  # a thread of the bound channel
        ("tg:-100123:7", None, ["web", "api.v2"]),  # a topic of a group web lists
        ("tg:42", None, ["api.v2"]),  # web is not for this chat; api.v2 is for every chat
        ("slack:T1:C3", None, ["api.v2"]),
    ],
)
def test_a_chat_binds_its_keys_and_a_project_lists_who_may_pick_it(
    tmp_path: Path, key: str, bound: str | None, may_pick: list[str]
) -> None:
    options = load(tmp_path, EXAMPLE).options
    assert options.bound_project(key) == bound
    assert options.projects_for(key) == may_pick


def test_without_projects_nothing_changes(tmp_path: Path) -> None:
    options = load(tmp_path, '[chats."tg:1"]\nverbosity = "off"\n').options
    assert options.projects == {}
    assert options.chats["tg:1"].project is None


@pytest.mark.parametrize("name", ["a", "A1.b_c-d", "9lives", "x" * 64])
def test_a_project_name_is_a_simple_word(tmp_path: Path, name: str) -> None:
    options = load(tmp_path, f'[projects."{name}"]\npath = "/srv/x"\n').options
    assert list(options.projects) == [name]


WEB = '[projects.web]\npath = "/srv/web"\n'

BROKEN: list[tuple[str, str, list[str]]] = [
    (
        "a name with a space",
        '[projects."my web"]\npath = "/srv/web"\n',
        ['projects."my web"', "not a project name"],
    ),
    ("a name with a slash", '[projects."a/b"]\npath = "/x"\n', ['projects."a/b"', "project name"]),
    ("a hidden name", '[projects.".web"]\npath = "/x"\n', ['projects.".web"', "project name"]),
    ("a name like an option", '[projects."-web"]\npath = "/x"\n', ['"-web"', "project name"]),
    ("a name too long", f'[projects.{"x" * 65}]\npath = "/x"\n', ["x" * 65, "project name"]),
    ("no path", "[projects.web]\nbase = 'main'\n", ["projects.web.path", "required"]),
    ("an unknown key", WEB + 'branch = "main"\n', ["projects.web.branch", "unknown setting"]),
    (
        "a base like an option",
        WEB + 'base = "--orphan"\n',
        ["projects.web.base", "'--orphan' is not a branch name", "option"],
    ),
    ("an empty base", WEB + 'base = ""\n', ["projects.web.base", "not a branch name"]),
    (
        "not a conversation key in chats",
        WEB + 'chats = ["tg:1", "telegram:1"]\n',
        ["projects.web.chats", '"telegram:1" is not a conversation key', "tg:"],
    ),
    (
        "a chat naming no configured project",
        WEB + '[chats."tg:1"]\nproject = "wbe"\n',
        ['chats."tg:1".project', "'wbe'", "configured: web"],
    ),
    (
        "a chat's project without any project",
        '[chats."tg:1"]\nproject = "web"\n',
        ['chats."tg:1".project', "'web'", "configured: none"],
    ),
    (
        "a chat with both a workspace and a project",
        WEB + '[chats."tg:1"]\nworkspace = "/srv/site"\nproject = "web"\n',
        ['chats."tg:1"', "both workspace and project", "worktree of their own"],
    ),
]


@pytest.mark.parametrize(
    ("toml", "named"), [(t, n) for _, t, n in BROKEN], ids=[c[0] for c in BROKEN]
)
def test_each_project_mistake_is_named(tmp_path: Path, toml: str, named: list[str]) -> None:
    text = problems(tmp_path, toml)
    for name in named:
        assert name in text
    assert "Traceback" not in text


def test_project_mistakes_are_reported_together_with_the_others(tmp_path: Path) -> None:
    text = problems(
        tmp_path,
        '[agent]\ncommand = []\n[projects."a b"]\npath = "/x"\n'
        '[projects.web]\npath = "/y"\nbase = "-x"\n[chats."tg:1"]\nproject = "nope"\n',
    )
    for name in ("agent.command", 'projects."a b"', "projects.web.base", 'chats."tg:1".project'):
        assert name in text


def test_loading_asks_no_git(tmp_path: Path) -> None:
    # Whether the path is a repository is `pi-bridge check`'s question, not the loader's.
    options = load(tmp_path, '[projects.web]\npath = "no/such/dir"\n').options
    assert options.projects["web"].path == tmp_path / "no" / "such" / "dir"


def git(where: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, env=GIT_ENV)


def make_repository(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    return path


def check_env(tmp_path: Path) -> dict[str, str]:
    """The agent does not exist (its line fails at once) and runs unsandboxed."""
    return {
        "PI_BRIDGE_AGENT_COMMAND": f"{tmp_path / 'no-such-pi'} --mode rpc",
        "PI_BRIDGE_SANDBOX": "off",
        "PI_BRIDGE_DATA_DIR": str(tmp_path / "data"),
    }


# Each project's path: a repository, a plain directory, a directory inside a
# repository (not its top), or nothing at all.
PATHS = {"repo": "good", "plain": "plain", "inside": "good/sub", "missing": "gone"}

CHECKS: list[tuple[str, dict[str, str], list[str], int]] = [
    ("no projects: no line", {}, [], 0),
    ("a repository", {"web": "repo"}, ["✓ projects: web is a git repository (git at /"], 0),
    (
        "two repositories",
        {"web": "repo", "api": "repo"},
        ["✓ projects: web, api are git repositories"],
        0,
    ),
    (
        "a plain directory",
        {"web": "repo", "docs": "plain"},
        [f"✗ project docs: {{tmp}}/{PATHS['plain']} is not a git repository (its top directory)"],
        1,
    ),
    (
        "every kind of wrong path",
        {"web": "repo", "docs": "plain", "sub": "inside", "old": "missing"},
        [
            f"✗ project docs: {{tmp}}/{PATHS['plain']} is not a git repository",
            f"✗ project sub: {{tmp}}/{PATHS['inside']} is not a git repository",
            f"✗ project old: {{tmp}}/{PATHS['missing']} is not a git repository",
        ],
        3,
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("projects", "lines", "failed"),
    [c[1:] for c in CHECKS],
    ids=[c[0] for c in CHECKS],
)
async def test_check_names_each_project_that_is_not_a_repository(
    tmp_path: Path, projects: dict[str, str], lines: list[str], failed: int
) -> None:
    make_repository(tmp_path / "good")
    (tmp_path / "good" / "sub").mkdir()
    (tmp_path / "plain").mkdir()
    toml = "".join(
        f'[projects.{name}]\npath = "{PATHS[kind]}"\n' for name, kind in projects.items()
    )
    loaded = load(tmp_path, toml, check_env(tmp_path))
    out = io.StringIO()
    count = await check(loaded, out)
    text = out.getvalue()
    assert count == 1 + failed, text  # 1: the agent that does not exist
    for line in lines:
        assert line.format(tmp=tmp_path) in text, text
    project_lines = [line for line in text.splitlines() if line[2:].startswith("project")]
    assert len(project_lines) == len(lines), text
    if failed:
        assert "✓ projects" not in text
        assert "project web" not in text  # the good one is not named


@pytest.mark.anyio
async def test_check_says_git_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_repository(tmp_path / "good")
    loaded = load(tmp_path, '[projects.web]\npath = "good"\n', check_env(tmp_path))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # the bridge's own PATH: where git is looked up
    out = io.StringIO()
    count = await check(loaded, out)
    assert count == 2, out.getvalue()
    assert "✗ projects: no git on PATH" in out.getvalue()

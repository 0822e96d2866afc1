"""The configuration's projects: `[projects.<name>]` tables and the chats' `project` key.

Checked here is only what the file itself tells: a project's name (it becomes a
directory name under the data dir and a `/project` argument), its `base` and `chats`,
and that a chat's `project` names one of them. Whether a path is a git repository is
I/O, and `pi-bridge check` asks that (`bridge.app.check`). Mistakes are appended to
`problems` as "setting: what is wrong" lines, like the rest of `bridge.app.config`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bridge.app.platforms import KEY_PREFIXES
from bridge.options import ProjectOptions

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from bridge.app.schema import ChatSection, Config, ProjectSection

# One path component, and a word a person types after /project: no spaces, no
# slashes, nothing that starts like an option or a hidden file.
PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A forge's repository, as its API names it: "owner/name" (GitLab: "group/sub/name").
FORGE_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+")


def project_options(
    config: Config, cwd: Path, where: str, problems: list[str]
) -> dict[str, ProjectOptions]:
    """The valid `[projects.<name>]` tables as options; a mistake in one leaves it out."""
    projects: dict[str, ProjectOptions] = {}
    for name, section in config.projects.items():
        if not PROJECT_NAME.fullmatch(name):
            problems.append(
                f'projects."{name}"{where}: not a project name: a letter or digit, then up '
                "to 63 letters, digits, '.', '_' or '-' (it becomes a directory name and "
                "the word after /project)"
            )
            continue
        at = f"projects.{name}"
        ok = True
        if section.base is not None and (not section.base or section.base.startswith("-")):
            why = "starts with '-': git would read it as an option" if section.base else "empty"
            problems.append(
                f"{at}.base{where}: {section.base!r} is not a branch name ({why}); leave "
                "base out to fork from the repository's current branch"
            )
            ok = False
        for key in section.chats:
            if not key.startswith(KEY_PREFIXES):
                problems.append(
                    f'{at}.chats{where}: "{key}" is not a conversation key: they start with '
                    f"{', '.join(KEY_PREFIXES)} (`/status` shows a conversation's key)"
                )
                ok = False
        ok = _remote_ok(at, section, where, problems) and ok
        if ok:
            projects[name] = ProjectOptions(
                path=section.path if section.path.is_absolute() else cwd / section.path,
                base=section.base,
                chats=tuple(section.chats),
                done_on_new=section.done_on_new,
                remote=section.remote,
                remote_token_env=section.remote_token_env,
                remote_user=section.remote_user,
                forge=section.forge,
                forge_api_url=section.forge_api_url,
                forge_repository=section.forge_repository,
            )
    return projects


def _remote_ok(at: str, section: ProjectSection, where: str, problems: list[str]) -> bool:
    """/pr's settings: a remote git cannot read as an option, a repository "owner/name"."""
    ok = True
    if not section.remote or section.remote.startswith("-"):
        problems.append(f"{at}.remote{where}: {section.remote!r} is not a remote name or URL")
        ok = False
    repository = section.forge_repository
    if repository and not FORGE_REPOSITORY.fullmatch(repository):
        problems.append(f'{at}.forge_repository{where}: {repository!r} is not "owner/name"')
        ok = False
    return ok


def chat_project(
    key: str, chat: ChatSection, config: Config, where: str, problems: list[str]
) -> str | None:
    """The project of `[chats."<key>"]`, if it names a configured one."""
    if chat.project is None:
        return None
    if chat.workspace is not None:
        problems.append(
            f'chats."{key}"{where}: both workspace and project: a project\'s conversations '
            "each work in a worktree of their own, not in one directory; keep one of the two"
        )
        return None
    if chat.project not in config.projects:
        known = ", ".join(config.projects) or "none"
        problems.append(
            f'chats."{key}".project{where}: no project {chat.project!r} is configured '
            f"(a [projects.<name>] table; configured: {known})"
        )
        return None
    return chat.project


def push_tokens_kept(config: Config, agent_env: Mapping[str, str], setting: str) -> list[str]:
    """A project's push token passed to the agent would give it the bridge's key."""
    return [
        f"{setting}: refusing to pass project {name}'s push token {section.remote_token_env}: "
        "only the bridge holds it"
        for name, section in config.projects.items()
        if section.remote_token_env and section.remote_token_env in agent_env
    ]

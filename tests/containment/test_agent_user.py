"""A root bridge's agent is not root on the host: it runs as the unprivileged default user.

The rest of the suite keeps its agents root on purpose (`SUITE_USER`); here a real agent
runs with `[sandbox] user` unset, in its own network, from a data dir that user can
pass through. Its bash tool writes its workspace (which the bridge handed to it), and
cannot read a root-only file nor connect to a root-only unix socket's path; the file it
wrote is owned by `nobody` on the host.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge.containment.agent_user import agent_user, closed_on_the_way, hand_over
from bridge.containment.sandbox import parts_missing
from bridge.options import SandboxOptions
from tests.support.agents import DEFAULT_VERSION, llm_ports
from tests.support.bridge_harness import KEY, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only a root bridge drops its agents")


def opened(folder: Path) -> None:
    """Let other users pass through `folder` and what holds it (pytest makes them 0700)."""
    for step in (folder, *folder.parents):
        if step == Path(tempfile.gettempdir()) or step == step.parent:
            break
        step.chmod(step.stat().st_mode | stat.S_IXOTH)


@ROOT_ONLY
@pytest.mark.anyio
@pytest.mark.agent
async def test_a_root_bridges_agent_runs_as_nobody_and_reads_no_root_only_file(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    opened(tmp_path)
    for folder in agent_home.root.rglob("*"):
        if folder.is_dir():
            folder.chmod(folder.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    agent_home.root.chmod(agent_home.root.stat().st_mode | stat.S_IXOTH)
    secret = tmp_path / "root-only.txt"
    secret.write_text("root's own\n")
    secret.chmod(0o600)
    look = (
        f"cat {secret} >/dev/null 2>&1 && echo secret=read || echo secret=denied; "
        "echo mine > mine.txt && echo write=ok"
    )
    fake_llm.add(
        "WHO", Reply(tool_calls=[ToolCall("bash", {"command": look})]), Reply(text="Seen.")
    )
    sandbox = SandboxOptions(host_ports=llm_ports(agent_home.env()))  # user unset: nobody
    missing = parts_missing(sandbox)  # as `pi-bridge run` checks at start
    if missing:
        pytest.fail(f"{'; '.join(missing)} (run deploy/dev-setup.sh)", pytrace=False)
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())
    opts = dataclasses.replace(opts, agent=dataclasses.replace(opts.agent, sandbox=sandbox))
    async with running_bridge(opts) as harness:
        await harness.say("WHO are you")
        await harness.shown("Seen.")
    tool = next(str(r.messages) for r in fake_llm.requests if "write=" in str(r.messages))
    seen = dict(re.findall(r"\b(secret|write)=([a-z]+)", tool))
    assert seen == {"secret": "denied", "write": "ok"}
    written = opts.workspace(KEY) / "mine.txt"
    assert written.stat().st_uid == pwd.getpwnam("nobody").pw_uid


def test_root_is_kept_only_on_purpose_and_a_bridge_that_is_not_root_changes_nothing() -> None:
    nobody = pwd.getpwnam("nobody")
    found = agent_user("", euid=0)
    assert found is not None
    assert (found.uid, found.gid) == (nobody.pw_uid, nobody.pw_gid)
    assert agent_user("root", euid=0) is None  # kept root on purpose, warned at start
    assert agent_user("", euid=1000) is None  # already its own, unprivileged user
    found = agent_user("4321:4321", euid=0)
    assert found is not None
    assert (found.uid, found.gid) == (4321, 4321)


def test_what_the_agents_user_cannot_pass_through_is_named(tmp_path: Path) -> None:
    user = agent_user("4321:4321", euid=0)
    assert user is not None
    closed = tmp_path / "closed"
    (closed / "inside").mkdir(parents=True)
    closed.chmod(0o700)
    found = closed_on_the_way(user, closed / "inside")
    assert found in (closed, *closed.parents)  # pytest's own folders may be closed first
    opened(closed)
    assert closed_on_the_way(user, closed / "inside") is None


@ROOT_ONLY
def test_the_agents_user_is_given_what_it_writes_and_links_are_not_followed(
    tmp_path: Path,
) -> None:
    user = agent_user("4321:4321", euid=0)
    assert user is not None
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "file").write_text("x")
    outside = tmp_path / "outside"
    outside.write_text("not the agent's")
    (work / "link").symlink_to(outside)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    (work / "folder-link").symlink_to(elsewhere)
    hand_over(user, [work])
    for path in (work, work / "sub", work / "sub" / "file", work / "link", work / "folder-link"):
        assert path.lstat().st_uid == 4321
    # The links themselves changed hands, never what they point to.
    assert outside.stat().st_uid == 0
    assert (elsewhere / "deep").stat().st_uid == 0

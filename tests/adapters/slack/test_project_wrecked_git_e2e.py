"""/project done after the agent wrecked its worktree's git (the issue "stuck project"),
end to end on Slack: the fake Slack, the real slack-bolt, the bridge, and the real pi
agent in its sandbox, doing with its bash tool what the agent of the issue did.

Thread A's agent replaces its worktree's repository (`mv .git .git-orig && git init`);
thread B's writes junk over its index. Each thread's /project done asks, Discard
removes what the bridge made, and /project picks the project again from scratch.
What is left is read from the repository with git itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.options import ChatOptions, ProjectOptions
from bridge.projects.worktrees import branch_name, slug
from tests.adapters.slack.test_e2e import action_id, find, slack_bridge, until_shown
from tests.conftest import require_agent
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import CHANNEL, TEAM
from tests.support.gitrepo import git, make_repo
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"  # the journey is the bridge's: one agent version is enough
WRECKS = {
    "REPLACE-GIT": "mv .git .git-orig && git init -q && echo WRECKED",
    "BREAK-INDEX": 'printf junk > "$(git rev-parse --git-dir)/index" && echo WRECKED',
}


def worktrees(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain")
    return [
        line.removeprefix("worktree ")
        for line in listed.splitlines()
        if line.startswith("worktree ")
    ]


async def test_done_and_discard_after_the_agent_wrecked_its_git_leave_the_project_cleanly(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(VERSION)
    repo = make_repo(tmp_path / "web")
    for word, command in WRECKS.items():
        call = ToolCall("bash", {"command": command})
        fake_llm.add(word, Reply(tool_calls=[call]), Reply(text=f"{word} did."))
    projects = {"web": ProjectOptions(path=repo, base="main")}
    chats = {f"slack:{TEAM}:{CHANNEL}": ChatOptions(project="web")}
    async with slack_bridge(agent_home, VERSION, tmp_path, projects=projects, chats=chats) as slack:
        roots = []
        for word in WRECKS:
            root = (await slack.mention(f"{word} please"))["payload"]["event"]["ts"]
            await until_shown(slack, root, f"{word} did.")
            await until_shown(slack, root, "✅ done")
            roots.append(root)
        for root in roots:
            await slack.thread_message("!project done", root)
            question = await until_shown(slack, root, "Keep it as it is, or discard")
            await slack.acked(await slack.press(question.ts, action_id(question, "Discard")))
            await until_shown(slack, root, "Discarded the worktree")
            await slack.thread_message("!project web", root)
            await until_shown(slack, root, "📁 Project web:")
            assert find(slack, root, "⚠️") is None
            assert find(slack, root, "Already working") is None

    assert tool_results(fake_llm).count("WRECKED\n") == 2, tool_results(fake_llm)
    keys = [f"slack:{TEAM}:{CHANNEL}:{root}" for root in roots]
    data = (tmp_path / "data").resolve()
    trees = [data / "worktrees" / "web" / slug(key) for key in keys]
    assert sorted(worktrees(repo)) == sorted(map(str, (repo, *trees)))
    for tree in trees:  # made again from scratch: nothing the agent left survived
        assert (tree / ".git").is_file()
        assert not (tree / ".git-orig").exists()
        assert git(tree, "status", "--porcelain") == ""
    branches = git(repo, "branch", "--list", "pi/*", "--format=%(refname:short)").split()
    assert sorted(branches) == sorted(branch_name(key) for key in keys)

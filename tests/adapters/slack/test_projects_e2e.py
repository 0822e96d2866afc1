"""Projects end to end on Slack: a channel bound to a git repository, each thread in it
working in its own worktree, through the fake Slack, the real slack-bolt, the bridge,
and the real pi agent in its sandbox (bwrap, the worktree's git dirs bound writable).

What the agents did is read from the repository with git itself; what the person saw,
from the fake's messages and uploads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from bridge.options import ChatOptions, ProjectOptions
from bridge.projects.worktrees import branch_name, slug
from tests.adapters.slack.test_e2e import WAIT, action_id, find, slack_bridge, until_shown
from tests.conftest import require_agent
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import CHANNEL, TEAM
from tests.support.gitrepo import git, make_repo
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import FakeSlack

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"  # the journey is the bridge's: one agent version is enough
COMMIT = "git add -A && git -c user.name=t -c user.email=t@t commit -qm b && echo COMMITTED"


def worktrees(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain")
    return [
        line.removeprefix("worktree ")
        for line in listed.splitlines()
        if line.startswith("worktree ")
    ]


def pi_branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--list", "pi/*", "--format=%(refname:short)").split()


def uploaded(slack: FakeSlack, thread: str) -> list[tuple[str, bytes]]:
    """(file name, content) of each file uploaded into `thread`."""
    found = []
    for call in slack.called("files.completeUploadExternal"):
        if call.args.get("thread_ts") == thread:
            for entry in json.loads(str(call.args["files"])):
                found.append((str(entry["title"]), slack.uploads[entry["id"]]))
    return found


def script(llm: FakeLLM) -> None:
    for name in ("A", "B"):
        write = ToolCall("write", {"path": f"{name.lower()}.txt", "content": f"from {name}\n"})
        llm.add(f"WRITE-{name}", Reply(tool_calls=[write]), Reply(text=f"{name} written."))
    llm.add(
        "COMMIT-B",
        Reply(tool_calls=[ToolCall("bash", {"command": COMMIT})]),
        Reply(text="Committed."),
    )
    llm.add(
        "WHERE-A",
        Reply(tool_calls=[ToolCall("bash", {"command": "pwd"})]),
        Reply(text="Here."),
    )


async def test_two_threads_of_a_bound_channel_each_work_in_their_own_worktree(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(VERSION)
    repo = make_repo(tmp_path / "web")
    script(fake_llm)
    projects = {"web": ProjectOptions(path=repo, base="main")}
    chats = {f"slack:{TEAM}:{CHANNEL}": ChatOptions(project="web")}  # all its threads
    async with slack_bridge(agent_home, VERSION, tmp_path, projects=projects, chats=chats) as slack:
        root_a = (await slack.mention("WRITE-A please"))["payload"]["event"]["ts"]
        root_b = (await slack.mention("WRITE-B please"))["payload"]["event"]["ts"]
        for root in (root_a, root_b):
            await until_shown(slack, root, "📝 1 file changed")
        await slack.thread_message("COMMIT-B now", root_b)
        await slack.thread_message("!diff", root_a)
        summary = await until_shown(slack, root_a, "1 file changed on")
        await slack.wait_until(lambda: bool(uploaded(slack, root_a)), WAIT)
        await until_shown(slack, root_b, "Committed.")
        [(name, patch)] = uploaded(slack, root_a)

    key_a, key_b = (f"slack:{TEAM}:{CHANNEL}:{root}" for root in (root_a, root_b))
    branch_a, branch_b = branch_name(key_a), branch_name(key_b)
    data = (tmp_path / "data").resolve()
    tree_a, tree_b = (data / "worktrees" / "web" / slug(key) for key in (key_a, key_b))
    assert sorted(worktrees(repo)) == sorted(map(str, (repo, tree_a, tree_b)))
    assert (tree_a / "a.txt").read_text() == "from A\n"
    assert (tree_b / "b.txt").read_text() == "from B\n"
    assert not (tree_a / "b.txt").exists()
    assert not (tree_b / "a.txt").exists()
    assert not (repo / "a.txt").exists()
    assert not (repo / "b.txt").exists()
    assert sorted(pi_branches(repo)) == sorted((branch_a, branch_b))
    # git worked inside B's sandbox: its commit is on its branch, not on main.
    assert git(repo, "log", "--format=%s", branch_b).split() == ["b", "start"]
    assert git(repo, "log", "--format=%s", "main").split() == ["start"]
    assert git(repo, "show", "--name-only", "--format=", branch_b).split() == ["b.txt"]
    assert "COMMITTED" in "".join(tool_results(fake_llm))

    assert "a.txt | 1 +" in summary.visible
    assert "b.txt" not in summary.visible
    assert name == branch_a.replace("/", "-") + ".diff"
    blob = git(repo, "hash-object", str(tree_a / "a.txt")).strip()
    assert patch.decode() == (
        "diff --git a/a.txt b/a.txt\n"
        "new file mode 100644\n"
        f"index 0000000..{blob[:7]}\n"
        "--- /dev/null\n"
        "+++ b/a.txt\n"
        "@@ -0,0 +1 @@\n"
        "+from A\n"
    )

    # A restarted bridge: thread A's agent starts again in its own worktree.
    async with slack_bridge(agent_home, VERSION, tmp_path, projects=projects, chats=chats) as slack:
        for _ in range(10_000):  # past the first fake's event ids: the store remembers them
            slack.new_ts()
        await slack.thread_message("WHERE-A are you", root_a)
        await until_shown(slack, root_a, "Here.")
        await until_shown(slack, root_a, "✅ done")
        await slack.thread_message("!project done", root_a)
        question = await until_shown(slack, root_a, "uncommitted change")
        assert "[Keep]" in question.visible
        assert "[Discard]" in question.visible
        await slack.acked(await slack.press(question.ts, action_id(question, "Discard")))
        await until_shown(slack, root_a, "Discarded the worktree")
        assert find(slack, root_a, "⚠️") is None

    assert str(tree_a) in [result.strip() for result in tool_results(fake_llm)]
    assert not tree_a.exists()
    assert worktrees(repo) == [str(repo), str(tree_b)]
    assert pi_branches(repo) == [branch_b]

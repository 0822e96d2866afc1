"""Projects end to end on Telegram: two forum topics of one group bound to one project,
each working in its own git worktree, through the fake Bot API, the real
python-telegram-bot, the bridge, and the real pi agent in its sandbox.

What the agent did is read from the repository with git itself; what the person saw,
from the fake's messages. (Slow-ish by design: the fake paces a group's messages as
Telegram does, 20 a minute, and both topics share that budget.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.options import ChatOptions, ProjectOptions
from tests.adapters.telegram.test_e2e import WAIT, telegram_bot
from tests.conftest import require_agent
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import FakeTelegram
from tests.support.gitrepo import git, make_repo
from tests.support.journeys import tool_results

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"
GROUP = -100777
TOPIC_A, TOPIC_B = 5, 6
BOT = "@pi_test_bot"


def in_topic(fake: FakeTelegram, topic: int) -> list[Message]:
    return [m for m in fake.bot_messages(GROUP) if m.thread_id == topic]


async def shown(fake: FakeTelegram, topic: int, text: str) -> Message:
    """The bot's message in `topic` that (once edited) contains `text`."""
    await fake.wait_for(lambda: any(text in m.text for m in in_topic(fake, topic)), WAIT)
    return next(m for m in in_topic(fake, topic) if text in m.text)


def worktrees(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain")
    return [
        line.removeprefix("worktree ")
        for line in listed.splitlines()
        if line.startswith("worktree ")
    ]


async def test_two_topics_of_a_group_each_work_in_their_own_worktree(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(VERSION)
    repo = make_repo(tmp_path / "web")
    for name in ("a", "b"):
        fake_llm.add(
            f"write {name}",
            Reply(
                tool_calls=[ToolCall("write", {"path": f"{name}.txt", "content": f"from {name}\n"})]
            ),
            Reply(text=f"{name} written."),
        )
    fake_llm.add(
        "where are you",
        Reply(tool_calls=[ToolCall("bash", {"command": "pwd && ls"})]),
        Reply(text="Here."),
    )
    opts = options(
        tmp_path / "data",
        agent_home.argv(VERSION),
        agent_home.env(),
        projects={"web": ProjectOptions(path=repo, base="main")},
        chats={f"tg:{GROUP}": ChatOptions(project="web", verbosity="off")},
    )
    async with FakeTelegram(enforce_limits=True) as fake:
        async with telegram_bot(opts, on=fake):
            fake.message(GROUP, f"{BOT} write a", thread_id=TOPIC_A)
            fake.message(GROUP, f"{BOT} write b", thread_id=TOPIC_B)
            for topic in (TOPIC_A, TOPIC_B):
                await shown(fake, topic, "📝 1 file changed")
            fake.message(GROUP, "/diff", thread_id=TOPIC_A)
            summary = await shown(fake, TOPIC_A, "1 file changed on")
            await fake.wait_for(lambda: any(m.document for m in in_topic(fake, TOPIC_A)), WAIT)
            [patch] = [m for m in in_topic(fake, TOPIC_A) if m.document]
        tree_a, tree_b = (
            next(p for p in worktrees(repo) if (tmp_path / p / f"{name}.txt").exists())
            for name in ("a", "b")
        )
        assert tree_a != tree_b
        assert not (repo / "a.txt").exists()
        assert not (repo / "b.txt").exists()
        assert not (tmp_path / tree_a / "b.txt").exists()
        assert not (tmp_path / tree_b / "a.txt").exists()
        branches = git(repo, "branch", "--list", "pi/*", "--format=%(refname:short)").split()
        assert len(branches) == 2
        assert "a.txt | 1 +" in summary.text
        assert patch.document is not None
        added = [line for line in patch.document.decode().splitlines() if line.startswith("+")]
        assert added == ["+++ b/a.txt", "+from a"]
        assert patch.filename.endswith(".diff")

        # A bridge restart: each topic's agent starts again in its own worktree.
        async with telegram_bot(opts, on=fake):
            fake.message(GROUP, f"{BOT} where are you", thread_id=TOPIC_A)
            await shown(fake, TOPIC_A, "Here.")
            fake.message(GROUP, "/project done", thread_id=TOPIC_A)
            question = await shown(fake, TOPIC_A, "uncommitted change")
            [discard] = [data for label, data in question.buttons if label == "Discard"]
            fake.press(GROUP, question.message_id, discard)
            await shown(fake, TOPIC_A, "Discarded the worktree")
    [pwd] = {r for r in tool_results(fake_llm) if r.startswith("/")}
    assert pwd.splitlines()[0] == tree_a
    assert worktrees(repo) == [str(repo.resolve()), tree_b]
    left = git(repo, "branch", "--list", "pi/*", "--format=%(refname:short)").split()
    assert len(left) == 1
    assert left[0] in branches
    assert not (tmp_path / tree_a).exists()

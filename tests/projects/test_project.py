"""A conversation's project (bridge/projects/project.py) on real repositories, without an agent.

`Projects` is driven through a small stand-in for its conversation (`Chat`: a record
and a save, what `Host` asks for). What it did is read back with git itself. The
guarded git calls are checked against what an agent can plant in its worktree and
its worktree's admin dir (both writable in its sandbox): each plant is first shown
to make plain git run a program, then shown to run nothing when the bridge asks.
Last, twenty conversations pick a project at the same moment through a whole bridge
(recording adapter, no platform, no agent).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.model import ChatRef, Inbound
from bridge.options import AgentOptions, BridgeOptions, ChatOptions, ProjectOptions
from bridge.projects.git import WorktreeError
from bridge.projects.project import Projects
from bridge.projects.worktrees import branch_name
from tests.support.bridge_harness import OWNER, running_bridge
from tests.support.gitrepo import isolated_git  # noqa: F401 (autouse fixture)

if TYPE_CHECKING:
    from bridge.store.records import ConversationRecord

pytestmark = pytest.mark.anyio

BOUND = "slack:T1:C2"  # a channel bound to project web: its threads work there
THREAD = f"{BOUND}:1700000000.000100"
ELSEWHERE = "tg:-100555"  # a chat with no binding


def git_sync(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, check=True, text=True
    )
    return done.stdout


async def git(where: Path, *args: str, check: bool = True) -> str:
    done = await anyio.run_process(["git", "-C", str(where), *args], check=check)
    return done.stdout.decode()


def make_repo(where: Path) -> Path:
    """A repository on `main` with one commit holding README.md and app.py."""
    where.mkdir()
    git_sync(where, "init", "-q", "-b", "main")
    (where / "README.md").write_text("hello\n")
    (where / "app.py").write_text("print('v1')\n")
    git_sync(where, "add", ".")
    git_sync(where, "commit", "-q", "-m", "first")
    return where


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "web").resolve()  # as git names it


@pytest.fixture
def api(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "api")


@pytest.fixture
def opts(tmp_path: Path, repo: Path, api: Path) -> BridgeOptions:
    """web is bound to the channel BOUND and open to every chat; api only to ELSEWHERE."""
    return BridgeOptions(
        data_dir=tmp_path / "data",
        agent=AgentOptions(argv=("false",), env={}),
        projects={
            "web": ProjectOptions(path=repo),
            "api": ProjectOptions(path=api, chats=(ELSEWHERE,)),
        },
        chats={BOUND: ChatOptions(project="web")},
    )


@dataclass
class Chat:
    """The conversation as `Projects` sees it (`bridge.projects.project.Host`): its record,
    saved in memory; how often it was saved and its agent stopped."""

    key: str
    record: ConversationRecord | None
    saves: list[dict[str, object]] = field(default_factory=list)
    reaps: int = 0

    async def save(self, **changes: object) -> None:
        assert self.record is not None
        self.record = self.record.model_copy(update=changes)
        self.saves.append(changes)

    async def reap(self) -> None:
        self.reaps += 1


def conversation(opts: BridgeOptions, key: str) -> tuple[Chat, Projects]:
    chat = Chat(key, opts.new_record(key, OWNER.id, 0.0))
    return chat, Projects(chat, opts)


async def pi_branches(repo: Path) -> list[str]:
    return (await git(repo, "branch", "--list", "pi/*", "--format=%(refname:short)")).split()


async def worktree_paths(repo: Path) -> list[str]:
    listing = await git(repo, "worktree", "list", "--porcelain")
    return [
        line.removeprefix("worktree ")
        for line in listing.splitlines()
        if line.startswith("worktree ")
    ]


# --- where the agent works ----------------------------------------------------------------


async def test_a_bound_chat_gets_its_worktree_on_a_pi_branch_once(
    opts: BridgeOptions, repo: Path
) -> None:
    chat, projects = conversation(opts, THREAD)
    assert projects.name() == "web"
    assert projects.checkout() is None

    path = await projects.workspace()

    assert path.is_dir()
    assert path.is_relative_to(opts.data_dir.resolve() / "worktrees" / "web")
    assert (path / "README.md").read_text() == "hello\n"
    branch = (await git(path, "branch", "--show-current")).strip()
    assert branch == branch_name(THREAD)
    assert branch.startswith("pi/slack-t1-c2-")
    assert chat.record is not None
    assert chat.record.checkout is not None
    assert chat.record.checkout.model_dump() == {
        "project": "web",
        "path": str(path),
        "branch": branch,
        "base": "main",
    }
    assert projects.git_dirs()[0] == repo / ".git" / "worktrees" / path.name

    again = await projects.workspace()

    assert again == path
    assert len(chat.saves) == 1, "the unchanged checkout was saved again"
    assert await pi_branches(repo) == [branch]
    assert len(await worktree_paths(repo)) == 2


async def test_a_chat_outside_any_project_works_in_its_own_workspace(
    opts: BridgeOptions, repo: Path
) -> None:
    chat, projects = conversation(opts, ELSEWHERE)
    assert projects.name() is None
    assert projects.allowed() == ["web", "api"]
    assert chat.record is not None
    assert await projects.workspace() == Path(chat.record.workspace)
    assert projects.git_dirs() == ()
    assert await projects.diff() is None
    assert await projects.pending() is None
    assert await pi_branches(repo) == []


@dataclass(frozen=True)
class Refusal:
    key: str
    first: str | None  # a project chosen before, whose worktree exists
    name: str
    says: str


REFUSALS = {
    "an unknown project": Refusal(
        THREAD, None, "nope", "⚠️ There is no project nope for this chat (projects here: web)."
    ),
    "a project kept for other chats": Refusal(
        THREAD, None, "api", "⚠️ There is no project api for this chat (projects here: web)."
    ),
    "another project while in one": Refusal(
        ELSEWHERE, "web", "api", "⚠️ This conversation works in web; /project done first."
    ),
    "the same project again": Refusal(ELSEWHERE, "web", "web", "Already working in web"),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
async def test_choosing_a_project_is_refused_and_changes_nothing(
    opts: BridgeOptions, repo: Path, api: Path, case: Refusal
) -> None:
    chat, projects = conversation(opts, case.key)
    if case.first is not None:
        assert (await projects.choose(case.first)).startswith(f"📁 Project {case.first}:")
    before, saves, reaps = chat.record, len(chat.saves), chat.reaps

    said = await projects.choose(case.name)

    assert said.startswith(case.says), said
    assert (chat.record, len(chat.saves), chat.reaps) == (before, saves, reaps)
    assert await pi_branches(api) == []
    assert len(await pi_branches(repo)) == (1 if case.first else 0)


async def test_choosing_a_project_stops_the_agent_and_makes_the_worktree_at_once(
    opts: BridgeOptions, api: Path
) -> None:
    chat, projects = conversation(opts, ELSEWHERE)
    assert chat.record is not None
    chat.record = chat.record.model_copy(update={"session_file": "/old/session.jsonl"})

    said = await projects.choose("api")

    branch = branch_name(ELSEWHERE)
    assert said.startswith(f"📁 Project api: this conversation works on branch {branch}, ")
    assert "forked from main" in said
    assert chat.reaps == 1
    assert chat.record.project == "api"
    assert chat.record.session_file is None, "the old session would resume in the old cwd"
    assert chat.record.checkout is not None
    assert await anyio.Path(chat.record.checkout.path).is_dir()
    assert await pi_branches(api) == [branch]


# --- what a run changed -------------------------------------------------------------------


async def test_a_run_counts_the_files_it_changed_and_the_next_run_only_its_own(
    opts: BridgeOptions,
) -> None:
    _, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    (path / "earlier.txt").write_text("before the run\n")  # not this run's change

    await projects.before_run()
    (path / "new-one.txt").write_text("one\n")
    (path / "sub").mkdir()
    (path / "sub" / "new-two.txt").write_text("two\n")
    (path / "app.py").write_text("print('v2')\n")
    first = await projects.run_ended()

    await projects.before_run()
    second = await projects.run_ended()

    await projects.before_run()
    (path / "new-one.txt").unlink()
    third = await projects.run_ended()

    assert (first, second, third) == (3, 0, 1)


async def test_outside_a_project_a_run_changed_nothing(opts: BridgeOptions) -> None:
    chat, projects = conversation(opts, ELSEWHERE)
    assert chat.record is not None
    workspace = Path(chat.record.workspace)
    await anyio.Path(workspace).mkdir(parents=True)
    await projects.before_run()
    (workspace / "file.txt").write_text("not in a repository\n")
    assert await projects.run_ended() == 0


# --- finishing ----------------------------------------------------------------------------


async def test_done_on_a_clean_worktree_keeps_the_branch(opts: BridgeOptions, repo: Path) -> None:
    chat, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    (path / "kept.txt").write_text("committed\n")
    await git(path, "add", "kept.txt")
    await git(path, "commit", "-q", "-m", "the agent's work")
    assert await projects.pending() == ()

    said = await projects.remove(discard=False)

    branch = branch_name(THREAD)
    assert said.startswith(f"🧹 Removed the worktree; branch {branch} is kept.")
    assert not path.exists()
    assert await pi_branches(repo) == [branch]
    assert await worktree_paths(repo) == [str(repo)]
    assert "kept.txt" in await git(repo, "show", "--name-only", "--format=", branch)
    assert chat.record is not None
    assert (chat.record.checkout, chat.record.project) == (None, "")
    assert projects.name() is None, "a bound chat's conversation stays out after done"
    assert chat.reaps == 1


async def test_done_without_discard_refuses_uncommitted_work(
    opts: BridgeOptions, repo: Path
) -> None:
    chat, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    (path / "draft.txt").write_text("unsaved\n")
    assert await projects.pending() == ("draft.txt",)

    with pytest.raises(WorktreeError, match=r"uncommitted changes \(draft.txt\)"):
        await projects.remove(discard=False)

    assert (path / "draft.txt").read_text() == "unsaved\n"
    assert chat.record is not None
    assert chat.record.checkout is not None


async def test_discard_removes_the_changes_the_worktree_and_the_branch(
    opts: BridgeOptions, repo: Path
) -> None:
    chat, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    (path / "draft.txt").write_text("unsaved\n")
    (path / "app.py").write_text("print('v2')\n")
    assert await projects.pending() == ("app.py", "draft.txt")

    said = await projects.remove(discard=True)

    assert said.startswith(f"🗑 Discarded the worktree and branch {branch_name(THREAD)}.")
    assert not path.exists()
    assert await pi_branches(repo) == []
    assert await worktree_paths(repo) == [str(repo)]
    assert (repo / "app.py").read_text() == "print('v1')\n"
    assert chat.record is not None
    assert chat.record.checkout is None
    assert await projects.pending() is None


async def test_a_worktree_removed_by_hand_is_made_again(opts: BridgeOptions, repo: Path) -> None:
    _, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    (path / "lost.txt").write_text("gone with the directory\n")
    shutil.rmtree(path)

    again = await projects.workspace()

    assert again == path
    assert (again / "README.md").read_text() == "hello\n"
    assert not (again / "lost.txt").exists()
    assert await projects.pending() == ()
    assert await worktree_paths(repo) == [str(repo), str(path)]


async def test_a_restarted_bridge_finds_the_worktree_from_the_record(
    opts: BridgeOptions, repo: Path
) -> None:
    chat, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    (path / "work.txt").write_text("from the agent\n")
    later = Projects(chat, opts)  # the same record, a new process

    found = await later.diff()

    assert found is not None
    assert found.files == 1
    assert "+from the agent" in found.patch
    assert await later.pending() == ("work.txt",)
    assert await later.workspace() == path


def stored(repo: Path, content: bytes) -> bool:
    """Whether the repository's shared object store, which every agent of the project
    reads, holds a blob of `content`."""
    blob = subprocess.run(
        ["git", "hash-object", "--stdin"], input=content, capture_output=True, check=True
    ).stdout.decode()
    found = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", blob.strip()], check=False)
    return found.returncode == 0


async def test_runs_put_no_uncommitted_file_where_other_agents_read_and_keep_little(
    opts: BridgeOptions, repo: Path
) -> None:
    _, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    for number in range(3):
        await projects.before_run()
        (path / f"secret-{number}.txt").write_text(f"not for the other threads {number}\n")
        assert await projects.run_ended() == 1
    found = await projects.diff()

    assert found is not None
    assert found.files == 3
    for number in range(3):
        assert not stored(repo, f"not for the other threads {number}\n".encode())
    scratch = opts.data_dir / "snapshots"
    assert len(list(scratch.rglob("objects"))) <= 1, "each run's snapshot outlived it"
    await projects.remove(discard=True)
    assert not [p for p in scratch.rglob("*") if p.is_file()]


# --- whatever the agent did to its worktree's git, /project done ends cleanly ---------------


def moved_aside(worktree: Path) -> None:
    """`mv .git .git-orig && git init`, as the agent of the issue "stuck project" did."""
    (worktree / ".git").rename(worktree / ".git-orig")
    git_sync(worktree, "init", "-q")


def replaced(worktree: Path) -> None:
    """`rm -rf .git && git init`."""
    (worktree / ".git").unlink()
    git_sync(worktree, "init", "-q")


@pytest.mark.parametrize("wreck", [moved_aside, replaced], ids=["mv .git", "rm -rf .git"])
async def test_done_after_the_agent_replaced_its_git_asks_and_discard_leaves_no_trace(
    opts: BridgeOptions, repo: Path, wreck: Callable[[Path], None]
) -> None:
    chat, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    wreck(path)

    pending = await projects.pending()
    said = await projects.remove(discard=True)

    assert pending is not None
    assert ".git" in pending, "a replaced .git would be dropped without asking"
    assert said.startswith(f"🗑 Discarded the worktree and branch {branch_name(THREAD)}."), said
    assert not path.exists()
    assert not (repo / ".git" / "worktrees" / path.name).exists()
    assert await pi_branches(repo) == []
    assert await worktree_paths(repo) == [str(repo)]
    assert chat.record is not None
    assert chat.record.checkout is None
    assert (await projects.choose("web")).startswith("📁 Project web:")
    assert (path / "README.md").read_text() == "hello\n"


async def test_done_after_the_agent_left_its_branch_and_the_bridge_restarted(
    opts: BridgeOptions, repo: Path
) -> None:
    chat, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    await git(path, "switch", "-q", "-c", "agent-own")
    later = Projects(chat, opts)

    pending = await later.pending()
    said = await later.remove(discard=False)

    assert pending == ()
    assert said.startswith(f"🧹 Removed the worktree; branch {branch_name(THREAD)} is kept.")
    assert not path.exists()
    assert await worktree_paths(repo) == [str(repo)]
    assert sorted(await pi_branches(repo)) == [branch_name(THREAD)]


# --- what an agent can plant does not make the bridge's git run anything -----------------
#
# The agent's sandbox lets it write its worktree (the `.git` file there) and its
# worktree's admin dir (`<repo>/.git/worktrees/<name>`, with `commondir`). Each plant
# below makes plain git in the worktree run `evil.sh`, which writes a marker; the
# test shows that first, so that it cannot pass for a plant that does nothing.

EVIL = """#!/bin/sh
echo "$0 $*" >> "{marker}"
cat
"""


@dataclass
class Planted:
    """A conversation's worktree with a plant in it, and how to tell it ran."""

    projects: Projects
    path: Path
    marker: Path
    expected: tuple[str, ...]  # the worktree's real uncommitted paths

    def ran(self) -> str:
        return self.marker.read_text() if self.marker.exists() else ""


Plant = Callable[[Path, Path, Path, Path], None]  # (worktree, admin dir, evil git dir, script)


def evil_git_dir(where: Path, script: Path) -> Path:
    """A whole other repository whose config runs `script` as fsmonitor and as a clean
    filter, with a commit of its own: were it read, every result would show it."""
    git_sync(where.parent, "init", "-q", "-b", "main", where.name)
    (where / "evil.txt").write_text("not the real worktree\n")
    git_sync(where, "add", ".")
    git_sync(where, "commit", "-q", "-m", "evil")
    arm(where / ".git", script)
    return where / ".git"


def arm(git_dir: Path, script: Path) -> None:
    config = ("config", "--file", str(git_dir / "config"))
    git_sync(git_dir, *config, "core.fsmonitor", str(script))
    git_sync(git_dir, *config, "filter.x.clean", str(script))
    git_sync(git_dir, *config, "filter.x.required", "true")


def git_file(worktree: Path, admin: Path, evil: Path, script: Path) -> None:
    (worktree / ".git").write_text(f"gitdir: {evil}\n")
    (worktree / ".gitattributes").write_text("* filter=x\n")


def common_dir_file(worktree: Path, admin: Path, evil: Path, script: Path) -> None:
    (admin / "commondir").write_text(f"{evil}\n")
    (worktree / ".gitattributes").write_text("* filter=x\n")


def repository_fsmonitor(worktree: Path, admin: Path, evil: Path, script: Path) -> None:
    # Not the agent's doing (the common config is not writable in its sandbox), but a
    # hook the operator's repository may carry: the bridge's -c overrides it.
    git_sync(worktree, "config", "core.fsmonitor", str(script))


PLANTS: dict[str, Plant] = {
    "the worktree's .git file points at another git dir": git_file,
    "the admin dir's commondir points at another git dir": common_dir_file,
    "the repository's config names an fsmonitor hook": repository_fsmonitor,
}


async def planted(
    opts: BridgeOptions, repo: Path, tmp_path: Path, plant: Plant, *, committed: bool = False
) -> Planted:
    """THREAD's worktree with two changes of its run (`committed`: by the agent, before
    it planted) and `plant` in it, between `before_run` and the run's end."""
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(EVIL.format(marker=marker))
    script.chmod(0o755)
    evil = evil_git_dir(tmp_path / "evil", script)
    _, projects = conversation(opts, THREAD)
    path = await projects.workspace()
    admin = repo / ".git" / "worktrees" / path.name
    assert admin in projects.git_dirs()
    await projects.before_run()
    (path / "a.txt").write_text("from the agent\n")
    (path / "app.py").write_text("print('v2')\n")
    if committed:
        await git(path, "add", "--all")
        await git(path, "commit", "-q", "-m", "the agent's work")
    plant(path, admin, evil, script)
    attributes = (".gitattributes",) if (path / ".gitattributes").exists() else ()
    changes = () if committed else ("a.txt", "app.py")
    return Planted(projects, path, marker, (*attributes, *changes))


async def plain_git_runs_it(planted: Planted) -> None:
    """The plant is real: git in the worktree without the bridge's guards runs it
    (checked first: the bridge may undo a plant, as it does a rewritten commondir)."""
    assert not planted.ran()
    await git(planted.path, "status", "--porcelain", check=False)
    assert planted.ran(), "the plant did not work: the test would prove nothing"
    planted.marker.unlink()


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
async def test_what_an_agent_plants_is_never_run_by_the_bridges_git(
    opts: BridgeOptions, repo: Path, tmp_path: Path, plant: Plant
) -> None:
    found = await planted(opts, repo, tmp_path, plant)
    await plain_git_runs_it(found)
    projects = found.projects
    calls = {
        "run_ended": projects.run_ended,
        "pending": projects.pending,
        "diff": projects.diff,
        "before_run": projects.before_run,
    }
    for name, call in calls.items():
        with contextlib.suppress(WorktreeError):  # failing is fine; running the plant is not
            await call()
        assert not found.ran(), f"{name} ran the plant: {found.ran()}"


RESULTS = {
    **PLANTS,
    # git's ref store reads <admin>/commondir whatever GIT_COMMON_DIR says: the
    # bridge puts the file back before it runs git there.
    "the admin dir's commondir points at another git dir": common_dir_file,
}


@pytest.mark.parametrize("plant", RESULTS.values(), ids=RESULTS.keys())
async def test_with_a_plant_the_bridge_still_describes_the_real_worktree(
    opts: BridgeOptions, repo: Path, tmp_path: Path, plant: Plant
) -> None:
    found = await planted(opts, repo, tmp_path, plant)
    projects = found.projects

    changed = await projects.run_ended()
    pending = await projects.pending()
    diff = await projects.diff()
    await projects.before_run()
    unchanged = await projects.run_ended()

    assert changed == len(found.expected)
    assert unchanged == 0
    assert pending is not None
    replaced = (".git",) if plant is git_file else ()  # so that done asks before removing
    assert sorted(pending) == sorted((*replaced, *found.expected))
    assert diff is not None
    assert diff.files == len(found.expected)
    assert "+from the agent" in diff.patch
    assert "+print('v2')" in diff.patch
    assert "evil" not in diff.patch + diff.stat
    assert not found.ran()


def lookalike_common_dir(worktree: Path, admin: Path, evil: Path, script: Path) -> None:
    """A copy of the repository's git dir, armed, named in the admin dir's `commondir`:
    its branches are the real ones, so the worktree still looks clean and unchanged."""
    copy = admin.parent.parent.parent.parent / "lookalike"
    shutil.copytree(admin.parent.parent, copy, symlinks=True)
    arm(copy, script)
    (admin / "commondir").write_text(f"{copy}\n")


@dataclass(frozen=True)
class Removal:
    plant: Plant
    discard: bool


REMOVALS = {
    # Without --force, `git worktree remove` runs a `git status` of its own in the
    # worktree, through <admin>/commondir.
    "done on a clean worktree whose commondir was replaced": Removal(
        lookalike_common_dir, discard=False
    ),
    "discard with a replaced commondir": Removal(lookalike_common_dir, discard=True),
    # `git worktree remove` refuses a worktree whose .git file does not point back
    # at its admin dir: the bridge repairs it first.
    "discard with a replaced .git file": Removal(git_file, discard=True),
}


@pytest.mark.parametrize("case", REMOVALS.values(), ids=REMOVALS.keys())
async def test_removing_a_worktree_with_a_plant_runs_nothing_and_removes_it(
    opts: BridgeOptions, repo: Path, tmp_path: Path, case: Removal
) -> None:
    # Without discard, /project done removes at once only what has nothing uncommitted.
    found = await planted(opts, repo, tmp_path, case.plant, committed=not case.discard)
    path, projects = found.path, found.projects
    assert bool(await projects.pending()) == case.discard
    assert not found.ran()

    said = await projects.remove(discard=case.discard)

    assert not found.ran(), f"removal ran the plant: {found.ran()}"
    assert said.startswith(("🧹 Removed", "🗑 Discarded")), said
    assert not path.exists()
    assert await worktree_paths(repo) == [str(repo)]


# --- twenty conversations at once, through the bridge -------------------------------------


async def test_twenty_conversations_pick_a_project_at_the_same_moment(
    tmp_path: Path, repo: Path
) -> None:
    spawned = tmp_path / "agent-started"
    opts = BridgeOptions(
        data_dir=tmp_path / "data",
        # /project is the bridge's own: no agent may start for it.
        agent=AgentOptions(argv=("sh", "-c", f"touch {spawned}"), env={}),
        allowed_users=frozenset({OWNER.id}),
        projects={"web": ProjectOptions(path=repo)},
    )
    keys = [f"tg:-100{n}" for n in range(20)]
    async with running_bridge(opts) as harness:

        async def pick(number: int, key: str) -> None:
            inbound = Inbound(key, ChatRef(key[3:]), OWNER, f"e{number}", text="/project web")
            await harness.bridge.handle(inbound)

        async with anyio.create_task_group() as tg:
            for number, key in enumerate(keys):
                tg.start_soon(pick, number, key)

        def answers() -> dict[str, list[str]]:
            return {key: harness.adapter.texts(key[3:]) for key in keys}

        await harness.until(lambda: all(answers().values()), within=40.0)
        await harness.bridge.outbox.flush()
        agents = [c.agent for c in harness.bridge.supervisor.conversations.values()]
        said = answers()

    for key, texts in said.items():
        made = f"📁 Project web: this conversation works on branch {branch_name(key)}, "
        assert len(texts) == 1, texts
        assert texts[0].startswith(made), texts
    branches = await pi_branches(repo)
    assert sorted(branches) == sorted(branch_name(key) for key in keys)
    listed = await worktree_paths(repo)
    assert len(listed) == 21
    assert len(set(listed)) == 21
    assert agents == [None] * 20
    assert not spawned.exists()

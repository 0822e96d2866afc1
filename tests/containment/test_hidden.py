"""What a conversation's agent cannot see (`bridge/containment/hidden.py`), the one answer its
sandbox and the bridge's own file reads share; the reads through the commands are in
tests/containment/test_hidden_reads.py."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from bridge.containment.hidden import Sight, hidden_paths, runtime_dirs
from bridge.options import AgentOptions, BridgeOptions, ChatOptions, SandboxOptions
from tests.support.agents import SUITE_USER
from tests.support.bridge_harness import KEY, options, running_bridge
from tests.support.paths import SUPPORT

# A bridge run from `run/` with its data dir `run/data` and its config file beside it;
# tg:1 works in `run/` itself, tg:2 in `run/theirs`, tg:3 in `run/theirs/inner`; the
# store is kept outside the data dir.
WORKSPACES = {"tg:1": "run", "tg:2": "run/theirs", "tg:3": "run/theirs/inner"}
EXTRA = ("run/pi-bridge.toml", "store.sqlite3")


def layout(root: Path) -> BridgeOptions:
    chats = {key: ChatOptions(workspace=root / place) for key, place in WORKSPACES.items()}
    sandbox = SandboxOptions(hidden=tuple(root / p for p in EXTRA), user=SUITE_USER)
    agent = AgentOptions(argv=("pi",), env={}, sandbox=sandbox)
    return BridgeOptions(data_dir=root / "run" / "data", agent=agent, chats=chats)


@pytest.mark.parametrize(
    ("key", "workspace", "hidden"),
    [
        ("tg:1", "run", ["run/data", *EXTRA, "run/theirs", "run/theirs/inner"]),
        ("tg:2", "run/theirs", ["run/data", *EXTRA, "run/theirs/inner"]),
        ("tg:3", "run/theirs/inner", ["run/data", *EXTRA]),
        (
            "tg:9",
            "run/data/workspaces/tg_9",
            ["run/data", *EXTRA, "run/theirs", "run/theirs/inner"],
        ),
    ],
    ids=[
        "a workspace holding the data dir and another's workspace",
        "a workspace inside another's: that one is not hidden, the one inside it is",
        "a workspace inside two others: neither is hidden",
        "a default workspace: the configured ones that do not hold it are hidden",
    ],
)
def test_what_each_conversations_agent_cannot_see(
    key: str, workspace: str, hidden: list[str], tmp_path: Path
) -> None:
    opts = layout(tmp_path)
    found = hidden_paths(opts, key, tmp_path / workspace)
    # Last, for every conversation: the system's runtime dirs (its sockets).
    assert found == (*((tmp_path / p).resolve() for p in hidden), *runtime_dirs())
    assert Path("/run") in runtime_dirs()  # a Linux system has one


# (what, the path, seen by tg:1, which works in run/ with its own folders in the data dir)
SEEN_BY_TG1 = [
    ("an ordinary file of its workspace", "run/notes.txt", True),
    ("a sibling named like the data dir", "run/data2/notes.txt", True),
    ("the data dir itself", "run/data", False),
    ("the store", "run/data/bridge.sqlite3", False),
    ("its own session", "run/data/sessions/tg_1/s.jsonl", True),
    ("its own home", "run/data/homes/tg_1/.bashrc", True),
    ("another conversation's session", "run/data/sessions/tg_2/s.jsonl", False),
    ("another conversation's home", "run/data/homes/tg_2/.bashrc", False),
    ("a default workspace of another", "run/data/workspaces/tg_9/notes.txt", False),
    ("another's configured workspace in its own", "run/theirs/notes.txt", False),
    ("the configuration file", "run/pi-bridge.toml", False),
    ("a store kept outside the data dir", "store.sqlite3", False),
    ("a file no rule names", "elsewhere/notes.txt", True),
]


@pytest.mark.parametrize(("what", "path", "seen"), SEEN_BY_TG1, ids=[r[0] for r in SEEN_BY_TG1])
def test_a_conversation_sees_its_own_folders_inside_hidden_ones_and_nothing_else_hidden(
    what: str, path: str, seen: bool, tmp_path: Path
) -> None:
    opts = layout(tmp_path)
    data = opts.data_dir
    own = [tmp_path / "run", data / "sessions" / "tg_1", data / "homes" / "tg_1"]
    sight = Sight(hidden_paths(opts, "tg:1", tmp_path / "run"), tuple(p.resolve() for p in own))
    assert sight.shows((tmp_path / path).resolve()) is seen


# The rule alone: the deepest folder holding a path decides, as the sandbox's mounts do
# (a deeper mount lands on a shallower one; at equal depth the bind-back wins).
RULE = [
    ("under a cover", "/d/x", False),
    ("under a folder bound back", "/d/o/x", True),
    ("under a cover inside a bound-back folder", "/d/o/h/x", False),
    ("that cover itself", "/d/o/h", False),
    ("under a folder both covered and bound back", "/w/x", True),
    ("under nothing", "/elsewhere", True),
]


@pytest.mark.parametrize(("what", "path", "seen"), RULE, ids=[r[0] for r in RULE])
def test_the_deepest_folder_holding_a_path_decides(what: str, path: str, seen: bool) -> None:
    sight = Sight(hidden=(Path("/d"), Path("/d/o/h"), Path("/w")), own=(Path("/d/o"), Path("/w")))
    assert sight.shows(Path(path)) is seen


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is checked by test_bwrap_...")
async def test_the_bridges_reads_see_what_the_running_agents_sandbox_shows(
    tmp_path: Path,
) -> None:
    """The sandbox and the reads can never disagree: their covers are the same, and the
    reads' own folders are what the sandbox binds back (writable and read-only)."""
    run = tmp_path / "run"
    (run / "notes.txt").parent.mkdir(parents=True)
    (run / "notes.txt").write_text("notes\n")
    (run / "pi-bridge.toml").write_text("")
    for folder in (tmp_path / "shared", run / "data" / "lookup"):
        folder.mkdir(parents=True)
    sandbox = SandboxOptions(
        user=SUITE_USER,
        hidden=(run / "pi-bridge.toml", tmp_path / "store.sqlite3"),
        read_write=(tmp_path / "shared",),
        read_only=(run / "data" / "lookup",),
    )
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    argv = (sys.executable, str(SUPPORT / "export_standin.py"))
    chats = {KEY: ChatOptions(workspace=run), "test:2": ChatOptions(workspace=run / "theirs")}
    agent = AgentOptions(argv=argv, env=env, sandbox=sandbox)
    async with running_bridge(options(run / "data", [], {}, agent=agent, chats=chats)) as chat:
        await chat.say("/get notes.txt")
        await chat.until(lambda: bool(chat.adapter.uploads))
        conversation = chat.bridge.supervisor.conversations[KEY]
        live = conversation.agent
        assert live is not None
        assert live.spec.sandbox is not None
        contained = live.spec.sandbox
        sight = conversation.projects.sight(live.spec.cwd)
    assert set(sight.own) == {*contained.writable, *contained.readable}
    covered = {*contained.hidden, *contained.hidden_files}
    assert covered <= set(sight.hidden)
    # The reads refuse the rest too: what the sandbox cannot cover until it exists.
    assert not any(p.exists() for p in set(sight.hidden) - covered)

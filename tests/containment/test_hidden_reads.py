"""The bridge's own file reads show nothing the conversation's agent cannot see.

/get, /export, the agent's `send_file` and the approval question's diff preview read
files with the bridge's rights. A chat whose workspace is the directory the bridge runs
in (`[chats.X] workspace = "."`, the data dir `./data` inside it) must still not be
handed the store, another conversation's session or workspace, or the configuration
file: the same paths its agent's sandbox hides (bridge/containment/hidden.py), in every sandbox
mode, since the reads are the bridge's own. Its ordinary files, and its own session
dir inside the data dir, still come through.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge.options import AgentOptions, ApprovalOptions, ChatOptions, SandboxOptions
from bridge.paths import SEND_FILE_EXTENSION
from tests.conftest import require_agent
from tests.support.agents import DEFAULT_VERSION, SUITE_USER, llm_ports
from tests.support.bridge_harness import KEY, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import SUPPORT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.options import ApprovalMode, BridgeOptions, SandboxMode
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

SECRET = "NOT-FOR-THIS-CHAT-5309"
HIDDEN = "hidden from"  # what each refusal says: the file is hidden from the agent
OTHER = "test:2"  # another conversation, with its workspace configured in ours
STANDIN = SUPPORT / "export_standin.py"
OTHERS_SESSION = "data/sessions/test_2/2026-01-01T00-00-00-000Z_other.jsonl"
OWN_SESSION = "data/sessions/test_1/2026-01-01T00-00-00-000Z_own.jsonl"

# What the agent of KEY cannot see, as names relative to its workspace, the run dir.
HIDDEN_NAMES = {
    "the store": "data/bridge.sqlite3",
    "another conversation's session": OTHERS_SESSION,
    "another conversation's workspace": "theirs/notes.txt",
    "the configuration file": "pi-bridge.toml",
    "a link to the store": "leak",
}


def run_dir(tmp_path: Path) -> Path:
    """The directory the bridge runs in: its config file and data dir inside, another
    conversation's configured workspace too, and an ordinary file of its own."""
    run = tmp_path / "run"
    for name in (OTHERS_SESSION, "theirs/notes.txt", "pi-bridge.toml"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(f"{SECRET}\n")
    (run / OWN_SESSION).parent.mkdir(parents=True)
    (run / OWN_SESSION).write_text('{"type":"session"}\n')
    (run / "notes.txt").write_text("ordinary notes\n")
    (run / "leak").symlink_to(run / "data" / "bridge.sqlite3")
    return run


def run_options(
    run: Path,
    argv: Sequence[str],
    env: dict[str, str],
    mode: SandboxMode,
    approvals: ApprovalMode = "off",
) -> BridgeOptions:
    """The chat KEY works in the run dir; the config file is hidden as config loading
    hides it (bridge/app/config.py); another conversation works in `theirs/`."""
    hidden = ((run / "pi-bridge.toml").resolve(),)
    sandbox = SandboxOptions(mode=mode, hidden=hidden, host_ports=llm_ports(env), user=SUITE_USER)
    chats = {KEY: ChatOptions(workspace=run), OTHER: ChatOptions(workspace=run / "theirs")}
    return options(
        run / "data",
        [],
        {},
        agent=AgentOptions(argv=tuple(argv), env=env, sandbox=sandbox),
        chats=chats,
        approvals=ApprovalOptions(mode=approvals),
    )


def standin(run: Path, mode: SandboxMode, export_answer: str = "") -> BridgeOptions:
    env = {"PATH": os.environ.get("PATH", os.defpath), "STANDIN_EXPORT_PATH": export_answer}
    return run_options(run, [sys.executable, str(STANDIN)], env, mode)


def refusals(chat: BridgeHarness) -> list[str]:
    return [m.text for m in chat.adapter.messages.values() if HIDDEN in m.text]


def uploaded(chat: BridgeHarness) -> list[str]:
    return [u.filename for u in chat.adapter.uploads]


def leaked(chat: BridgeHarness) -> bool:
    sent = b"".join(u.data for u in chat.adapter.uploads)
    return SECRET.encode() in sent or b"SQLite format" in sent or SECRET in chat.all_text()


# --- /get ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_get_refuses_what_the_sandbox_hides_and_still_sends_the_chats_own_files(
    mode: SandboxMode, tmp_path: Path
) -> None:
    run = run_dir(tmp_path)
    async with running_bridge(standin(run, mode)) as chat:
        for name in HIDDEN_NAMES.values():
            await chat.say(f"/get {name}")
        await chat.say("/get notes.txt")
        await chat.say(f"/get {OWN_SESSION}")  # its own session dir, inside the data dir
        answered = len(HIDDEN_NAMES) + 2
        await chat.until(lambda: len(uploaded(chat)) + len(refusals(chat)) >= answered)
        await chat.bridge.outbox.flush()
        assert sorted(uploaded(chat)) == sorted(["notes.txt", Path(OWN_SESSION).name])
        assert len(refusals(chat)) == len(HIDDEN_NAMES)
        assert not leaked(chat)


async def test_get_of_a_missing_hidden_file_says_hidden_not_missing(tmp_path: Path) -> None:
    """Nothing is told about what lies behind the cover, not even whether it exists."""
    run = run_dir(tmp_path)
    async with running_bridge(standin(run, "off")) as chat:
        await chat.say("/get data/sessions/test_2/no-such.jsonl")
        await chat.until(lambda: bool(refusals(chat)) or chat.find("No file") is not None)
        assert chat.find("No file") is None


# --- /export ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    ["data/bridge.sqlite3", OTHERS_SESSION, "theirs/notes.txt", "pi-bridge.toml"],
    ids=["the store", "another session", "another workspace", "the config file"],
)
async def test_export_refuses_an_answer_naming_what_the_sandbox_hides(
    answer: str, tmp_path: Path
) -> None:
    run = run_dir(tmp_path)
    async with running_bridge(standin(run, "off", answer)) as chat:
        await chat.say("/export")
        await chat.until(lambda: bool(uploaded(chat)) or bool(refusals(chat)))
        await chat.bridge.outbox.flush()
        assert uploaded(chat) == []
        assert len(refusals(chat)) == 1
        assert not leaked(chat)


async def test_export_in_the_chats_own_session_dir_inside_the_data_dir_is_sent(
    tmp_path: Path,
) -> None:
    run = run_dir(tmp_path)
    export = run / "data" / "sessions" / "test_1" / "pi-session-own.html"
    export.write_text("<html>the session</html>")
    async with running_bridge(standin(run, "off", str(export))) as chat:
        await chat.say("/export")
        await chat.until(lambda: bool(uploaded(chat)) or bool(refusals(chat)))
        assert uploaded(chat) == ["pi-session-own.html"]


# --- the agent's send_file -------------------------------------------------------------


@pytest.mark.agent
async def test_send_file_refuses_what_the_sandbox_hides_even_with_the_sandbox_off(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    """Unsandboxed, the agent sees the store and its extension lets the call through:
    the bridge's own rule still refuses it."""
    require_agent(DEFAULT_VERSION)
    run = run_dir(tmp_path)
    names = [*HIDDEN_NAMES.values(), "notes.txt"]
    calls = [Reply(tool_calls=[ToolCall("send_file", {"path": name})]) for name in names]
    fake_llm.add("send them", *calls, Reply(text="All sent."))
    argv = agent_home.argv(DEFAULT_VERSION, "-e", str(SEND_FILE_EXTENSION))
    async with running_bridge(run_options(run, argv, agent_home.env(), "off")) as chat:
        await chat.say("send them please")
        await chat.shown("All sent.")
        await chat.idle()
        assert uploaded(chat) == ["notes.txt"]
        assert len(refusals(chat)) == len(HIDDEN_NAMES)
        assert not leaked(chat)


# --- the approval question's diff preview ----------------------------------------------


@pytest.mark.agent
@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_a_write_questions_preview_shows_nothing_of_another_conversations_file(
    mode: SandboxMode, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(DEFAULT_VERSION)
    run = run_dir(tmp_path)
    write = ToolCall("write", {"path": "theirs/notes.txt", "content": "overwritten\n"})
    fake_llm.add("overwrite", Reply(tool_calls=[write]), Reply(text="Left it."))
    opts = run_options(run, agent_home.argv(DEFAULT_VERSION), agent_home.env(), mode, "writes")
    async with running_bridge(opts) as chat:
        await chat.say("overwrite their notes")
        question = await chat.shown("Approve this write")
        assert "overwritten" in question  # the intended change is shown
        assert not leaked(chat)  # but nothing of what is there now
        await chat.press("Deny")
        await chat.shown("Left it.")
    assert (run / "theirs" / "notes.txt").read_text() == f"{SECRET}\n"

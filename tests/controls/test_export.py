"""/export uploads the session's HTML export, and nothing else the bridge can read.

The agent names the file it wrote, and the agent runs whatever its users ask: a
hostile (or tricked) one names `/proc/self/environ`, a link to a file outside its
session, or a huge file. A stand-in agent (tests/support/export_standin.py) gives
those answers; the bridge must upload only a regular file under the conversation's
session dir or workspace, within the size cap. The real agents' own export goes
through.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest

from bridge.controls.export import MAX_EXPORT_BYTES
from tests.support.agents import AGENT_VERSIONS
from tests.support.bridge_harness import KEY, options, running_bridge
from tests.support.fake_llm import Reply
from tests.support.paths import SUPPORT

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

STANDIN = SUPPORT / "export_standin.py"
SECRET = "BRIDGE-ONLY-SECRET-4711"
REFUSED = "not a file in this conversation's session; not sent"
TOO_BIG = "larger than"


def standin_options(data: Path, answer: str) -> BridgeOptions:
    env = {"PATH": os.environ.get("PATH", os.defpath), "STANDIN_EXPORT_PATH": answer}
    return options(data, [sys.executable, str(STANDIN)], env)


def secret_outside(tmp_path: Path) -> Path:
    """A file the bridge can read but that is no part of any conversation."""
    secret = tmp_path / "bridge-secrets.env"
    secret.write_text(f"TOKEN={SECRET}\n")
    return secret


def session_of(data: Path) -> Path:
    session = data / "sessions" / "test_1"
    session.mkdir(parents=True, exist_ok=True)
    return session


def proc_environ(tmp_path: Path, data: Path) -> str:
    return "/proc/self/environ"


def link_to_outside(tmp_path: Path, data: Path) -> str:
    link = session_of(data) / "export.html"
    link.symlink_to(secret_outside(tmp_path))
    return str(link)


def dot_dot_out_of_the_session(tmp_path: Path, data: Path) -> str:
    secret_outside(tmp_path)
    return str(session_of(data) / ".." / ".." / ".." / "bridge-secrets.env")


def relative_out_of_the_workspace(tmp_path: Path, data: Path) -> str:
    secret_outside(tmp_path)
    return "../../../bridge-secrets.env"  # from the agent's cwd, data/workspaces/test_1


def a_fifo_in_the_session(tmp_path: Path, data: Path) -> str:
    fifo = session_of(data) / "export.html"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    return str(fifo)


def the_session_dir_itself(tmp_path: Path, data: Path) -> str:
    return str(session_of(data))


HOSTILE: list[Callable[[Path, Path], str]] = [
    proc_environ,
    link_to_outside,
    dot_dot_out_of_the_session,
    relative_out_of_the_workspace,
    a_fifo_in_the_session,
    the_session_dir_itself,
]


@pytest.mark.parametrize("answer", HOSTILE, ids=lambda f: f.__name__)
async def test_an_export_answer_naming_a_file_outside_the_session_is_not_uploaded(
    answer: Callable[[Path, Path], str], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with running_bridge(standin_options(data, answer(tmp_path, data))) as chat:
        await chat.say("/export")
        await chat.until(lambda: bool(chat.adapter.uploads) or chat.find(REFUSED) is not None)
        await chat.bridge.outbox.flush()
        assert [u.filename for u in chat.adapter.uploads] == []
        assert chat.find(REFUSED) is not None
        assert SECRET not in chat.all_text()


async def test_an_export_over_the_size_cap_is_not_uploaded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    huge = session_of(data) / "export.html"
    with huge.open("wb") as f:
        f.truncate(MAX_EXPORT_BYTES + 1)  # sparse: costs no disk
    async with running_bridge(standin_options(data, str(huge))) as chat:
        await chat.say("/export")
        await chat.until(lambda: bool(chat.adapter.uploads) or chat.find(TOO_BIG) is not None)
        await chat.bridge.outbox.flush()
        assert [u.filename for u in chat.adapter.uploads] == []
        assert chat.find(TOO_BIG) is not None


@pytest.mark.parametrize("where", ["session", "workspace"])
async def test_an_export_inside_the_conversation_is_uploaded(where: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = session_of(data) if where == "session" else data / "workspaces" / "test_1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pi-session-1.html").write_text("<html>the session</html>")
    # The workspace's file named as pi names it, relative to the agent's cwd.
    answer = str(folder / "pi-session-1.html") if where == "session" else "pi-session-1.html"
    async with running_bridge(standin_options(data, answer)) as chat:
        await chat.say("/export")
        await chat.until(lambda: bool(chat.adapter.uploads))
        (upload,) = chat.adapter.uploads
        assert (upload.filename, upload.data) == ("pi-session-1.html", b"<html>the session</html>")


@pytest.mark.agent
@pytest.mark.parametrize("version", AGENT_VERSIONS)
async def test_export_uploads_the_real_agents_html_export_of_the_session(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    from tests.conftest import require_agent

    require_agent(version)
    fake_llm.add("remember", Reply(text="Noted: PAPAYA."))
    opts = options(tmp_path / "data", agent_home.argv(version), agent_home.env())
    async with running_bridge(opts) as chat:
        await chat.say("remember PAPAYA")
        await chat.shown("Noted: PAPAYA.")
        await chat.idle()
        await chat.say("/export")
        await chat.until(lambda: bool(chat.adapter.uploads))
        (upload,) = chat.adapter.uploads
        assert upload.filename.endswith(".html")
        assert b"<html" in upload.data.lower()
        # Written where the bridge asked, in the session dir; not into the workspace.
        assert [p.name for p in opts.session_dir(KEY).glob("*.html")] == [upload.filename]
        assert not list(opts.workspace(KEY).glob("*.html"))

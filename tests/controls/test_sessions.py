"""/sessions and its [Resume] buttons: how a session is listed, what a press may
resume, and resuming with no live agent or a legacy one across a bridge restart
(the Telegram journeys: tests/adapters/telegram/test_sessions_e2e.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge.controls.session_files import SessionFile, Summary, new_session_name
from bridge.controls.sessions import GONE, NO_WORKSPACE, NONE_YET, TITLE, entry
from bridge.options import AgentOptions, SandboxOptions
from tests.conftest import require_agent
from tests.support.agents import DEFAULT_VERSION, LEGACY_VERSION, SUITE_USER, llm_ports
from tests.support.bridge_harness import KEY, options, running_bridge
from tests.support.fake_llm import Reply

if TYPE_CHECKING:
    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sessions"
AT = 1795627463.0  # 2026-11-25 17:24:23 UTC
FIXTURE_CWD = '"/srv/lab/ws"'  # where the fixtures' agents ran, rewritten


def script(llm: FakeLLM) -> None:
    llm.add("kiwi", Reply(text="Kiwi noted."))
    llm.add("mango", Reply(text="Mango noted."))
    llm.add("which fruit", Reply(text="The fruit you named."))


def history_of(llm: FakeLLM, prompt: str) -> str:
    """Everything the model was sent with the request whose prompt has `prompt`."""
    [request] = [r for r in llm.requests if prompt in r.last_user_text]
    return json.dumps(request.messages)


def legacy_options(agent_home: AgentHome, tmp_path: Path) -> BridgeOptions:
    """The legacy agent as an operator configures it: no `--session-dir` flags."""
    require_agent(LEGACY_VERSION)
    agent = AgentOptions(
        argv=tuple(agent_home.argv(LEGACY_VERSION)),
        env=agent_home.env(),
        session_flags=False,
        sandbox=SandboxOptions(host_ports=llm_ports(agent_home.env()), user=SUITE_USER),
    )
    return options(tmp_path / "data", [], {}, agent=agent)


def saved(opts: BridgeOptions, fixture: str, at: float, key: str = KEY) -> Path:
    """A session file the agent wrote earlier in the conversation `key`: in its
    folder, with its workspace as the session's cwd (pi 0.73.1 refuses to open a
    session whose cwd does not exist)."""
    folder, workspace = opts.session_dir(key), opts.workspace(key)
    folder.mkdir(parents=True, exist_ok=True)
    workspace.mkdir(parents=True, exist_ok=True)
    path = folder / new_session_name(at)
    text = (FIXTURES / fixture).read_text("utf-8")
    path.write_text(text.replace(FIXTURE_CWD, json.dumps(str(workspace.resolve()))), "utf-8")
    os.utime(path, (at, at))
    return path


@pytest.mark.parametrize(
    ("summary", "current", "shown"),
    [
        (
            Summary("", "remember kiwi", 2, 0.0),
            True,
            "3. “remember kiwi”  ◀ current\n    2026-11-25 17:24 UTC · 2 messages · $0.00",
        ),
        (
            Summary("Fruit talk", "remember kiwi", 1, None),
            False,
            "3. Fruit talk — “remember kiwi”\n    2026-11-25 17:24 UTC · 1 message",
        ),
        (
            Summary("Fruit talk", "", 0, None),
            False,
            "3. Fruit talk\n    2026-11-25 17:24 UTC · 0 messages",
        ),
        (
            Summary("", "", 0, None),
            False,
            "3. (no messages yet)\n    2026-11-25 17:24 UTC · 0 messages",
        ),
        (
            Summary(
                "A name far too long for one line of a phone's list", "x " * 80, 40, 1.5, False
            ),
            False,
            "3. A name far too long for one l… — “x x x x x x x x x x x x x x x x x x x x…”\n"
            "    2026-11-25 17:24 UTC · 40+ messages · $1.50+",
        ),
    ],
)
def test_a_listed_session_says_what_it_is_when_and_how_long(
    summary: Summary, current: bool, shown: str
) -> None:
    assert entry(3, SessionFile("s.jsonl", AT, summary), current) == shown


@pytest.mark.anyio
async def test_with_no_session_saved_yet_the_list_says_so(
    agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())
    async with running_bridge(opts) as harness:
        await harness.say("/sessions")
        await harness.shown(NONE_YET)
        assert harness.bridge.supervisor.conversations[KEY].agent is None


@pytest.mark.anyio
async def test_a_resume_button_whose_file_became_a_link_is_refused(
    agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())
    path = saved(opts, "pi-0.73.1-named.jsonl", AT)
    secret = tmp_path / "elsewhere.jsonl"
    shutil.copyfile(FIXTURES / "pi-0.13.2.jsonl", secret)
    async with running_bridge(opts) as harness:
        await harness.say("/sessions")
        await harness.shown("1. Fruit talk — “remember kiwi please”")
        path.unlink()
        path.symlink_to(secret)  # the agent may write its session folder
        await harness.press("Resume 1", contains=TITLE)
        await harness.shown(GONE)
        record = await harness.bridge.store.get_conversation(KEY)
    assert record is not None
    assert record.session_file is None


@pytest.mark.anyio
async def test_a_session_whose_workspace_is_gone_is_not_resumed(
    agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())
    path = saved(opts, "pi-0.73.1-named.jsonl", AT)
    gone = tmp_path / "moved-away"
    path.write_text(path.read_text("utf-8").replace(str(opts.workspace(KEY).resolve()), str(gone)))
    async with running_bridge(opts) as harness:
        await harness.say("/sessions")
        await harness.press("Resume 1", contains=TITLE)
        await harness.shown(NO_WORKSPACE)
        record = await harness.bridge.store.get_conversation(KEY)
    assert record is not None
    assert record.session_file is None


@pytest.mark.anyio
@pytest.mark.agent
async def test_resume_with_no_agent_running_starts_the_next_one_on_that_session(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    require_agent(DEFAULT_VERSION)
    script(fake_llm)
    opts = options(tmp_path / "data", agent_home.argv(DEFAULT_VERSION), agent_home.env())
    saved(opts, "pi-0.73.1-named.jsonl", AT)
    async with running_bridge(opts) as harness:
        await harness.say("/sessions")
        await harness.press("Resume 1", contains=TITLE)
        await harness.shown("▶ Resumed Fruit talk — “remember kiwi please”")
        assert harness.bridge.supervisor.conversations[KEY].agent is None
        await answer(harness, "which fruit did I name?", "The fruit you named.")
    assert "remember kiwi please" in history_of(fake_llm, "which fruit")


@pytest.mark.anyio
@pytest.mark.agent
async def test_the_legacy_agent_resumes_its_history_after_a_bridge_restart(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    opts = legacy_options(agent_home, tmp_path)
    script(fake_llm)
    async with running_bridge(opts) as harness:
        await answer(harness, "remember kiwi", "Kiwi noted.")
    async with running_bridge(opts) as harness:  # a new bridge, so a new agent
        await answer(harness, "which fruit did I name?", "The fruit you named.")
        await harness.say("/sessions")
        listed = await harness.shown(TITLE)
    history = history_of(fake_llm, "which fruit")
    assert "remember kiwi" in history
    assert "Kiwi noted." in history
    # The bridge named the file in the conversation's session dir, so it is listed.
    assert listed.split("\n")[1] == "1. “remember kiwi”  ◀ current"
    # The fake model has prices (tests/support/agents.py), so the session cost something.
    assert re.search(r" · 4 messages · \$0\.\d\d$", listed), listed


async def answer(harness: BridgeHarness, text: str, answer: str) -> None:
    await harness.say(text)
    await harness.shown(answer)
    await harness.idle()

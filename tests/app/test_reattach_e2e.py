"""Running tasks survive a bridge restart: `pi-bridge run` as a process, the fake
Telegram, the real agent under its host (bridge/conversation/hosts.py, bridge/rpc/agenthost).

A run with a 20-second tool; the bridge is stopped mid-tool (SIGTERM: it detaches;
SIGKILL: it just dies) and started again 5 s later, from the same checkout or from
another copy of the project (an upgrade in place). The tool's later output and the
final answer appear, in the same status message, exactly once. A dialog that opens
while no bridge runs is shown with its buttons afterwards and answered. A host left
alone past `detach_timeout` finishes the run and exits, leaving no process.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.cli import (
    WAIT,
    agent_processes,
    bridge_process,
    cli_env,
    kill_agents,
    run_cli,
    stop,
    write_config,
)
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.journeys import tool_results
from tests.support.loopback import until
from tests.support.paths import REPO

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_telegram import Message

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

CHAT = 42
ANSWER = "The long job is finished."
FIGS = "Figs, as you asked."
# Its outputs are not in its command, so seeing them means the tool got that far.
TOOL = "printf 'first-%s\\n' half; sleep 20; printf 'second-%s\\n' half"
CONFIG = '[telegram]\npoll_timeout = 1\n[agents]\non_stop = "detach"\n'


def env_for(tmp_path: Path, home: AgentHome, telegram: FakeTelegram, **more: str) -> dict[str, str]:
    config = write_config(tmp_path, CONFIG + more.pop("extra_config", ""))
    settings = {
        "PI_BRIDGE_CONFIG": config,
        "PI_BRIDGE_ON_STOP": "detach",
        "PI_BRIDGE_APPROVALS": "off",
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "TELEGRAM_FILE_BASE_URL": telegram.base_file_url,
        "TELEGRAM_ALLOWED_USERS": str(CHAT),
    }
    return cli_env(tmp_path, home, **(settings | more))


async def halt(process: Process, how: signal.Signals) -> None:
    if how == signal.SIGTERM:
        assert await stop(process) == 0
    else:
        process.kill()
        await process.wait()


def answers(telegram: FakeTelegram, text: str) -> list[Message]:
    return [m for m in telegram.bot_messages(CHAT) if text in m.text]


def another_checkout(tmp_path: Path) -> Path:
    """A copy of the project's code elsewhere, as an upgrade unpacks one."""
    copy = tmp_path / "checkout-2"
    for part in ("bridge", "adapters"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize(
    ("how", "elsewhere"),
    [(signal.SIGTERM, False), (signal.SIGKILL, False), (signal.SIGTERM, True)],
    ids=["sigterm", "sigkill", "upgrade-in-place"],
)
async def test_a_run_survives_a_restart_in_the_same_status_message(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, how: signal.Signals, elsewhere: bool
) -> None:
    fake_llm.add(
        "long job",
        Reply(tool_calls=[ToolCall("bash", {"command": TOOL})]),
        Reply(text=ANSWER),
    )
    fake_llm.add("MEANWHILE", Reply(text=FIGS))  # the steer comes with the tool's result
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        env = env_for(tmp_path, agent_home, telegram)
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(CHAT, "start the long job")
                status = await telegram.bot_message("⏳ working", CHAT, within=WAIT)
                await telegram.bot_message("first-half", CHAT, within=WAIT)
                await halt(process, how)
            assert agent_processes(data), "the agent ended with the bridge"
            assert "second-half" not in "\n".join(m.text for m in telegram.bot_messages(CHAT))
            # Sent while no bridge runs: Telegram keeps it; it steers the run when back.
            telegram.message(CHAT, "MEANWHILE: mention figs too")
            await anyio.sleep(5)
            if elsewhere:
                env = env | {"PYTHONPATH": str(another_checkout(tmp_path))}
            async with bridge_process(tmp_path, env, "second.log") as process:
                await telegram.wait_for(lambda: "✅ done" in status.text, WAIT)
                await telegram.bot_message("second-half", CHAT, within=WAIT)
                await telegram.bot_message(FIGS, CHAT, within=WAIT)
                assert await stop(process) == 0
        finally:
            kill_agents(data)
    # Each of the model's answers is shown once (ANSWER only if pi asked for it before
    # taking the steer in, which depends on its version).
    assert len(answers(telegram, FIGS)) == 1
    assert len(answers(telegram, ANSWER)) <= 1
    assert not [m for m in telegram.bot_messages(CHAT) if "✅ done" in m.text and m is not status]
    assert "interrupted" not in status.text
    # The prompt went to the model once: the restart did not send it again.
    assert len([r for r in fake_llm.requests if r.rule == "long job" and r.step == 0]) == 1
    assert any(r.rule == "MEANWHILE" for r in fake_llm.requests), "the steer was lost"


async def test_a_dialog_that_opens_while_no_bridge_runs_is_answered_after(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add(
        "risky job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 4; echo napped"})]),
        # Asked about only once the first tool is done: by then no bridge runs.
        Reply(tool_calls=[ToolCall("bash", {"command": "sudo reboot || echo spared"})]),
        Reply(text="Risky job handled."),
    )
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        env = env_for(tmp_path, agent_home, telegram, PI_BRIDGE_APPROVALS="dangerous")
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(CHAT, "do the risky job")
                await telegram.bot_message("🔧 bash", CHAT, within=WAIT)
                await halt(process, signal.SIGTERM)
            await anyio.sleep(7)  # the gate asks meanwhile, and nobody is there
            async with bridge_process(tmp_path, env, "second.log") as process:
                question = await telegram.bot_message("Approve this", CHAT, within=WAIT)
                [deny] = [data for label, data in question.buttons if label == "⛔ Deny"]
                telegram.press(CHAT, question.message_id, deny)
                await telegram.bot_message("Risky job handled.", CHAT, within=WAIT)
                assert await stop(process) == 0
        finally:
            kill_agents(data)
    assert [r for r in tool_results(fake_llm) if "Denied" in r]
    assert not [r for r in tool_results(fake_llm) if r.strip() == "spared"]  # never ran


async def test_a_host_left_alone_finishes_its_run_and_leaves_no_process(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    marker = tmp_path / "data" / "workspaces" / f"tg_{CHAT}" / "finished"
    fake_llm.add(
        "lonely job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 4; touch finished"})]),
        Reply(text="Lonely job done."),
    )
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        env = env_for(tmp_path, agent_home, telegram, extra_config="detach_timeout = 1\n")
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(CHAT, "the lonely job")
                await telegram.bot_message("🔧 bash", CHAT, within=WAIT)
                await halt(process, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await until(lambda: not agent_processes(data), WAIT)
            assert not agent_processes(data), "a host outlived its detach timeout"
        finally:
            kill_agents(data)
    assert marker.exists(), "the run was cut instead of finished"


async def test_stop_agents_ends_what_a_stopped_bridge_left_running(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add(
        "endless job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 300"})]),
        Reply(text="Never reached."),
    )
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        env = env_for(tmp_path, agent_home, telegram)
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(CHAT, "the endless job")
                await telegram.bot_message("🔧 bash", CHAT, within=WAIT)
                await halt(process, signal.SIGTERM)
            assert agent_processes(data)
            done = await run_cli(tmp_path, env, "stop-agents")
            assert done.returncode == 0, done.stderr
            assert b"stopped 1 agent(s)" in done.stdout
            with contextlib.suppress(TimeoutError):
                await until(lambda: not agent_processes(data), WAIT)
            assert not agent_processes(data), "stop-agents left a process"
            again = await run_cli(tmp_path, env, "stop-agents")
            assert b"stopped 0 agent(s)" in again.stdout
        finally:
            kill_agents(data)

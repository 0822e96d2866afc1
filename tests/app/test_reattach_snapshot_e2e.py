"""A take-back from a snapshot through the fake Telegram: `pi-bridge run` as a process
with agent hosts, the real agent, the fake model (bridge/rpc/shown.py,
bridge/conversation/hosts.py).

One chat runs the job with no restart: what the other chat must end as. The other runs
it, and once the store (sqlite) holds a snapshot covering the second tool's first output,
the bridge is SIGKILLed and started again: its chat must end with the same messages, in
the same order, with the same text (figures aside): no tool message twice, the final
answer complete, in the same status message. The host forgets what a stored snapshot
covers, so a bridge that ignored it would miss the run's start.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.shown import Snapshot
from bridge.store import open_store
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, write_config
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import TOKEN, FakeTelegram

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

CHAT, PLAIN = 42, 43  # restarted mid-run; run with no restart
WORDS = " ".join(f"w{n}" for n in range(1, 61))
ANSWER = f"All three steps are done: {WORDS} — the end."
# Their outputs are not in their commands, so seeing them means the tool got that far.
ONE = "printf 'one-%s\\n' out"
TWO = "printf 'two-%s\\n' out; sleep 8; printf 'three-%s\\n' out"
CONFIG = '[telegram]\npoll_timeout = 1\n[agents]\non_stop = "detach"\n'


def script(fake_llm: FakeLLM) -> None:
    fake_llm.add(
        "snapshot job",
        Reply(text="Looking first.", tool_calls=[ToolCall("bash", {"command": ONE})]),
        Reply(text="Now the long part.", tool_calls=[ToolCall("bash", {"command": TWO})]),
        Reply(text=ANSWER, delay=0.01),
    )


def chat_of(telegram: FakeTelegram, chat: int) -> list[str]:
    """The chat as its reader sees it, figures (durations, tokens, cost) as `#`."""
    return [re.sub(r"\d+(?:[.,]\d+)*", "#", m.text) for m in telegram.bot_messages(chat)]


async def snapshot_with(data: Path, key: str, text: bytes) -> Snapshot:
    """The stored snapshot of `key`, once one covers `text`."""
    store = await open_store("sqlite", data)
    try:
        with anyio.fail_after(WAIT):
            while True:
                stored = await store.get_shown(key)
                snapshot = Snapshot.decode(stored) if stored is not None else None
                if snapshot is not None and any(text in data for _, data in snapshot.records):
                    return snapshot
                await anyio.sleep(0.1)
    finally:
        await store.aclose()


async def test_a_bridge_killed_after_a_snapshot_ends_the_chat_as_without_restart(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    script(fake_llm)
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        env = cli_env(
            tmp_path,
            agent_home,
            PI_BRIDGE_CONFIG=write_config(tmp_path, CONFIG),
            PI_BRIDGE_ON_STOP="detach",
            PI_BRIDGE_APPROVALS="off",
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
            TELEGRAM_ALLOWED_USERS=f"{CHAT},{PLAIN}",
        )
        try:
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(PLAIN, "run the snapshot job")
                plain = await telegram.bot_message("⏳ working", PLAIN, within=WAIT)
                await telegram.wait_for(lambda: "✅ done" in plain.text, WAIT)
                telegram.message(CHAT, "run the snapshot job")
                status = await telegram.bot_message("⏳ working", CHAT, within=WAIT)
                await telegram.bot_message("two-out", CHAT, within=WAIT)
                await snapshot_with(data, f"tg:{CHAT}", b"two-out")
                process.kill()
                await process.wait()
            assert not any("three-out" in text for text in chat_of(telegram, CHAT))
            async with bridge_process(tmp_path, env, "second.log") as process:
                await telegram.wait_for(lambda: "✅ done" in status.text, WAIT)
                await telegram.bot_message("the end.", CHAT, within=WAIT)
                await anyio.sleep(1)  # any late edit or send would land by now
                process.terminate()
                await process.wait()
        finally:
            kill_agents(data)
    assert chat_of(telegram, CHAT) == chat_of(telegram, PLAIN)
    assert sum(ANSWER in m.text for m in telegram.bot_messages(CHAT)) == 1
    log = (tmp_path / "second.log").read_text(errors="replace")
    assert "taken back from a snapshot" in log

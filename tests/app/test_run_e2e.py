"""`pi-bridge run` as it runs on a server: one process, Telegram and Slack, the redis store.

The whole stack, nothing stubbed of ours: `python -m bridge.app.cli run` as a real
subprocess with the store on a real `redis-server`, the real python-telegram-bot
and slack-bolt against the project's fake Telegram and Slack servers, the real
agent against the scripted fake LLM, all on 127.0.0.1. One conversation per
platform; the metrics endpoint is scraped and its counters checked; SIGTERM in
the middle of a run drains (the live messages say "interrupted", no agent is
left); a second process on the same store and data dir resumes both
conversations and handles no update twice. And on Telegram with the sqlite store, a
SIGKILL while a bash tool runs: the agent and the tool's processes die with the
bridge, and the next process edits the status left live to say so and answers in
the same conversation. Slack in HTTP mode, as configured from the environment:
Slack's URL check, signed events and a slash command are served, a forged request
is refused.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.render.status import CRASHED
from tests.support.cli import (
    DRAIN,
    WAIT,
    agent_processes,
    bridge_process,
    cli_env,
    get,
    kill_agents,
    stop,
    write_config,
)
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, FakeSlack
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.journeys import script_long_run
from tests.support.loopback import free_port, until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import Posted

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="redis-server is not installed"),
]

CHAT = 42  # the Telegram user's private chat (its id is the user's id)
INTERRUPTED = "interrupted: the bridge is restarting"
CONFIG = f"[limits]\ndrain_timeout = {DRAIN}\n[telegram]\npoll_timeout = 1\n"
# A killed bridge's agents get SIGTERM from the kernel at once and end their tools and
# themselves in well under a second; room for a loaded 2-core machine, far below 30 s.
ORPHAN_EXIT = 10.0


def telegram_env(telegram: FakeTelegram) -> dict[str, str]:
    """Settings that point `pi-bridge run` at the fake Telegram, serving CHAT's user."""
    return {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "TELEGRAM_FILE_BASE_URL": telegram.base_file_url,
        "TELEGRAM_ALLOWED_USERS": str(CHAT),
    }


def slack_shown(slack: FakeSlack, thread: str, text: str) -> Posted | None:
    return next(
        (
            m
            for m in reversed(list(slack.messages.values()))
            if not m.deleted and (m.thread_ts == thread or m.ts == thread) and text in m.visible
        ),
        None,
    )


async def slack_until(slack: FakeSlack, thread: str, text: str) -> Posted:
    await slack.wait_until(lambda: slack_shown(slack, thread, text) is not None, WAIT)
    found = slack_shown(slack, thread, text)
    assert found is not None
    return found


def sample(metrics: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text; 0 when absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$", metrics, re.M)
    return float(match.group(1)) if match else 0.0


async def metrics_when(port: int, ready: str, **labels: str) -> str:
    """Scrape until `ready`{labels} is at least 1 (counters land a moment after the chat)."""
    with anyio.fail_after(WAIT):
        while True:
            status, text = await get(port, "/metrics")
            assert status == 200
            if sample(text, ready, **labels) >= 1:
                return text
            await anyio.sleep(0.1)


async def test_run_serves_both_platforms_on_redis_then_drains_and_resumes(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("APPLE", Reply(text="Figs are sweet."))
    fake_llm.add("BANANA", Reply(text="Kiwis are fuzzy."))
    slow = Reply(tool_calls=[ToolCall("bash", {"command": "sleep 60; echo late"})])
    fake_llm.add("CHERRY", slow, Reply(text="Should not get here."))
    fake_llm.add("DAMSON", slow, Reply(text="Should not get here."))
    fake_llm.add("ELDER", Reply(text="Still figs."))
    fake_llm.add("FEIJOA", Reply(text="Still kiwis."))
    data = tmp_path / "data"
    metrics_port = free_port()
    config = write_config(tmp_path, CONFIG)

    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram, FakeSlack() as slack:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_CONFIG=config,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_METRICS_PORT=str(metrics_port),
                **telegram_env(telegram),
                SLACK_BOT_TOKEN=slack.bot_token,
                SLACK_APP_TOKEN=slack.app_token,
                SLACK_API_BASE_URL=slack.base_url,
                SLACK_ALLOWED_USERS=ALICE,
            )

            # --- first process: one conversation per platform, metrics, SIGTERM mid-run ---
            async with bridge_process(tmp_path, env, "first.log") as process:
                telegram.message(CHAT, "tell me about APPLE")
                await slack.connected()
                root = (await slack.mention("tell me about BANANA"))["payload"]["event"]["ts"]
                await telegram.bot_message("Figs are sweet.", CHAT, within=WAIT)
                await slack_until(slack, root, "Kiwis are fuzzy.")

                text = await metrics_when(
                    metrics_port, "pi_bridge_runs_finished_total", platform="telegram"
                )
                text = await metrics_when(
                    metrics_port, "pi_bridge_runs_finished_total", platform="slack"
                )
                for platform in ("telegram", "slack"):
                    one = {"platform": platform}
                    assert sample(text, "pi_bridge_inbound_messages_total", **one) == 1
                    assert sample(text, "pi_bridge_runs_started_total", **one) == 1
                    assert sample(text, "pi_bridge_runs_finished_total", **one) == 1
                    assert sample(text, "pi_bridge_live_agents", **one) == 1
                    assert sample(text, "pi_bridge_conversations", **one) == 1
                    assert sample(text, "pi_bridge_inbound_to_agent_seconds_count", **one) == 1
                    assert sample(text, "pi_bridge_agent_events_total", **one, kind="MessageUpdate")
                    assert sample(text, "pi_bridge_platform_calls_total", **one, method="send")
                    assert sample(text, "pi_bridge_outbox_dropped_total", **one) == 0
                assert sample(text, "pi_bridge_platform_rate_limited_total") == 0
                assert "pi_bridge_platform_rate_limited_total{" not in text
                health = await get(metrics_port, "/healthz")
                assert health == (200, '{"status": "ok", "platforms": ["slack", "telegram"]}')

                telegram.message(CHAT, "CHERRY please")
                await slack.thread_message("DAMSON please", root)
                await telegram.bot_message("sleep 60", CHAT, within=WAIT)
                await slack_until(slack, root, "sleep 60")
                assert agent_processes(data)

                assert await stop(process) == 0

            # The drain ended the runs: the live messages say so, and no agent is left.
            await telegram.bot_message(INTERRUPTED, CHAT, within=1)
            assert slack_shown(slack, root, INTERRUPTED) is not None
            assert telegram.find("Should not get here.") is None
            assert slack_shown(slack, root, "Should not get here.") is None
            assert not agent_processes(data)

            # --- second process: same store and data dir; both conversations resume ---
            async with bridge_process(tmp_path, env, "second.log") as process:
                telegram.message(CHAT, "ELDER")
                await slack.connected()
                # No mention: the thread is known from the store, so it is still ours.
                await slack.thread_message("FEIJOA", root)
                await telegram.bot_message("Still figs.", CHAT, within=WAIT)
                await slack_until(slack, root, "Still kiwis.")
                assert await stop(process) == 0
            assert not agent_processes(data)

    # Each update was handled once, across the restart.
    asked = [r.last_user_text for r in fake_llm.requests]
    for word in ("APPLE", "BANANA", "CHERRY", "DAMSON", "ELDER", "FEIJOA"):
        assert sum(1 for a in asked if word in a) == 1, asked
    # The resumed agents were given the earlier conversation (their session files).
    for again, earlier, answer, interrupted in (
        ("ELDER", "tell me about APPLE", "Figs are sweet.", "CHERRY"),
        ("FEIJOA", "tell me about BANANA", "Kiwis are fuzzy.", "DAMSON"),
    ):
        request = next(r for r in fake_llm.requests if again in r.last_user_text)
        history = str(request.messages)
        assert earlier in history
        assert answer in history
        assert interrupted in history


def survivors(root: Path) -> dict[int, str]:
    """The processes still running in `root`'s workspaces, pid → command line."""
    found = {}
    for pid in agent_processes(root):
        with contextlib.suppress(OSError):
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            found[pid] = b" ".join(argv).decode(errors="replace").strip()
    return found


async def test_a_bridge_killed_mid_tool_leaves_no_process_and_its_successor_retires_the_run(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("remember", Reply(text="Noted: PLUM."))
    script_long_run(fake_llm, "long job")
    fake_llm.add("what fruit", Reply(text="It was PLUM."))
    data = tmp_path / "data"
    async with FakeTelegram() as telegram:
        config = write_config(tmp_path, CONFIG)
        env = cli_env(tmp_path, agent_home, PI_BRIDGE_CONFIG=config, **telegram_env(telegram))
        try:
            async with bridge_process(tmp_path, env, "killed.log") as process:
                telegram.message(CHAT, "remember PLUM")
                await telegram.bot_message("Noted: PLUM.", CHAT, within=WAIT)
                job = telegram.message(CHAT, "start the long job")
                # The status shows the tool at its first paced edit, a few seconds in.
                status = await telegram.bot_message("🔧 bash sleep 30", CHAT, within=WAIT)
                assert [text for text, _ in status.buttons] == ["⏹ Stop"]
                running = survivors(data).values()
                assert any(c.startswith("sleep 30") for c in running), running
                process.kill()  # SIGKILL: no drain, no cleanup of any kind
                await process.wait()

            # The agent and the tool it ran die with the bridge, long before `sleep 30` ends.
            with contextlib.suppress(TimeoutError):
                await until(lambda: not survivors(data), ORPHAN_EXIT)
            assert not survivors(data), "outlived the bridge"
            assert "⏳ working" in status.text
            assert status.buttons
            assert telegram.reactions.get((CHAT, job.message_id)) == ["👀"]
            edits = len(status.edited_at)

            # --- a new process on the same data dir retires the run and resumes the chat ---
            async with bridge_process(tmp_path, env, "restarted.log") as process:
                await telegram.wait_for(lambda: status.text == CRASHED, WAIT)
                assert status.buttons == []
                # 👀 on the request gives way to 👎: that run never ended.
                reacted = (CHAT, job.message_id)
                await telegram.wait_for(lambda: telegram.reactions.get(reacted) == ["👎"], WAIT)
                telegram.message(CHAT, "what fruit did I say?")
                await telegram.bot_message("It was PLUM.", CHAT, within=WAIT)
                assert await stop(process) == 0
            assert len(status.edited_at) == edits + 1  # edited once, to say so, not again
            assert not agent_processes(data)
        finally:
            kill_agents(data)

    assert telegram.find("Should not get here.") is None
    resumed = next(r for r in fake_llm.requests if "what fruit" in r.last_user_text)
    history = str(resumed.messages)
    assert "remember PLUM" in history
    assert "Noted: PLUM." in history
    assert "start the long job" in history


def task_roots(slack: FakeSlack) -> list[Posted]:
    """Top-level messages of the bot: the roots `/pi` posts."""
    return [m for m in slack.messages.values() if m.thread_ts is None]


async def test_run_serves_slack_over_http_when_given_a_signing_secret(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("GRAPE", Reply(text="Grapes grow in bunches."))
    fake_llm.add("HONEYDEW", Reply(text="Honeydew is a melon."))
    port = free_port()
    config = write_config(
        tmp_path, f'[limits]\ndrain_timeout = {DRAIN}\n[slack]\nhttp_host = "127.0.0.1"\n'
    )
    async with FakeSlack(events_url=f"http://127.0.0.1:{port}/slack/events") as slack:
        env = cli_env(
            tmp_path,
            agent_home,
            PI_BRIDGE_CONFIG=config,
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_SIGNING_SECRET=slack.signing_secret,
            SLACK_HTTP_PORT=str(port),
            SLACK_API_BASE_URL=slack.base_url,
            SLACK_ALLOWED_USERS=ALICE,
        )
        async with bridge_process(tmp_path, env, "http.log") as process:
            checked: list[tuple[int, str]] = []

            async def url_checked() -> bool:
                with contextlib.suppress(OSError):  # not listening yet
                    checked.append(await slack.verify_url())
                return bool(checked) and checked[-1][0] == 200

            with anyio.fail_after(WAIT):
                while not await url_checked():  # noqa: ASYNC110 (until the port listens)
                    await anyio.sleep(0.2)
            assert "challenge-" in checked[-1][1]
            forged = await slack.send_envelope(
                "events_api",
                slack.event_callback(slack.mention_event("GRAPE forged")),
                secret="not-the-secret",
            )
            assert slack.answers[forged["envelope_id"]] == 401
            root = (await slack.mention("tell me about GRAPE"))["payload"]["event"]["ts"]
            await slack_until(slack, root, "Grapes grow in bunches.")
            await slack.acked(await slack.slash("tell me about HONEYDEW"))
            await until(lambda: bool(task_roots(slack)), WAIT)
            [task_root] = task_roots(slack)
            assert "HONEYDEW" in task_root.text
            await slack_until(slack, task_root.ts, "Honeydew is a melon.")
            assert await stop(process) == 0
    assert set(slack.answers.values()) <= {200, 401}
    assert not [r for r in fake_llm.requests if "forged" in r.last_user_text]

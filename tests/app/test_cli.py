"""`pi-bridge` as an operator runs it: a real subprocess, real agent, fake LLM and platforms.

Each test starts `python -m bridge.app.cli` in a temporary working directory (so no
stray ./pi-bridge.toml is read) with a minimal environment: the agent command
points at the project-installed pi on the fake LLM, the data dir is under
tmp_path. Platform checks go to the fake Telegram and Slack servers on 127.0.0.1.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.cli import (
    DRAIN,
    agent_processes,
    cli_env,
    command,
    get,
    run_cli,
    write_config,
)
from tests.support.fake_llm import Reply
from tests.support.fake_slack import FakeSlack
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.fake_transcribe import FakeTranscriber
from tests.support.loopback import free_port

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio


async def test_help_reads_well(tmp_path: Path) -> None:
    done = await run_cli(tmp_path, cli_env(tmp_path), "--help")
    out = done.stdout.decode()
    assert done.returncode == 0
    for word in ("run", "check", "console", "PI_BRIDGE_CONFIG", "TELEGRAM_BOT_TOKEN"):
        assert word in out


BROKEN = [
    ("toml value", "[limits]\nmax_agents = 0\n", {}, ["limits.max_agents"]),
    ("toml typo", "[limits]\nmax_agent = 2\n", {}, ["limits.max_agent", "unknown setting"]),
    ("env value", "", {"PI_BRIDGE_METRICS_PORT": "nine"}, ["PI_BRIDGE_METRICS_PORT"]),
    ("secret in file", '[telegram]\nbot_token = "1:zzz-secret"\n', {}, ["TELEGRAM_BOT_TOKEN"]),
    ("slack mode", "", {"SLACK_BOT_TOKEN": "xoxb-1"}, ["SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"]),
    (
        "no allowlist",
        "",
        {"TELEGRAM_BOT_TOKEN": "1:abc"},
        ["TELEGRAM_ALLOWED_USERS", "PI_BRIDGE_ALLOW_EVERYONE=true"],
    ),
]


@pytest.mark.parametrize(
    ("toml", "env", "named"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN]
)
async def test_check_names_each_broken_setting(
    tmp_path: Path, toml: str, env: dict[str, str], named: list[str]
) -> None:
    config = write_config(tmp_path, toml)
    done = await run_cli(tmp_path, cli_env(tmp_path, None, PI_BRIDGE_CONFIG=config) | env, "check")
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode != 0
    assert "✗ config:" in out
    for name in named:
        assert name in out
    assert "Traceback" not in out
    assert "zzz-secret" not in out


async def test_run_with_a_broken_config_says_what_without_a_traceback(tmp_path: Path) -> None:
    env = cli_env(tmp_path, PI_BRIDGE_STORE="mysql://db")
    done = await run_cli(tmp_path, env, "run", stdin=b"")
    err = done.stderr.decode()
    assert done.returncode == 2
    assert "PI_BRIDGE_STORE" in err
    assert "Traceback" not in err


async def test_a_warning_while_reading_the_configuration_is_logged_like_every_other(
    tmp_path: Path,
) -> None:
    # Logged before the log is set up, it went out raw, past the redactor.
    config = write_config(tmp_path, "[telegram]\npaced_for_groups = true\n")
    env = cli_env(tmp_path, PI_BRIDGE_CONFIG=config, TELEGRAM_BOT_TOKEN="1:abc")
    done = await run_cli(tmp_path, env, "check")
    err = done.stderr.decode()
    assert re.search(r"WARNING +bridge\.app\.config: telegram\.paced_for_groups", err), err


async def test_run_open_to_everyone_on_purpose_warns_loudly_at_start(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:
        env = cli_env(
            tmp_path,
            TELEGRAM_BOT_TOKEN="999:refused-token",  # the fake refuses it: run stops at once
            TELEGRAM_API_BASE_URL=telegram.base_url,
            PI_BRIDGE_ALLOW_EVERYONE="true",
            PI_BRIDGE_SANDBOX="off",
        )
        done = await run_cli(tmp_path, env, "run")
    err = done.stderr.decode()
    assert re.search(r"WARNING .*telegram has no allowlist.*EVERYONE", err), err


@pytest.mark.agent
async def test_check_passes_with_the_real_agent(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    done = await run_cli(tmp_path, cli_env(tmp_path, agent_home), "check")
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    names = [line.split(":")[0] for line in lines]
    assert names == ["✓ config", "✓ sandbox", "✓ agent", "✓ store"]
    assert "get_state" in lines[2]


async def test_check_reports_a_missing_agent(tmp_path: Path) -> None:
    env = cli_env(tmp_path, PI_BRIDGE_AGENT_COMMAND=str(tmp_path / "no-such-pi") + " --mode rpc")
    done = await run_cli(tmp_path, env, "check")
    out = done.stdout.decode()
    assert done.returncode == 1
    assert "✗ agent:" in out
    assert "no-such-pi" in out
    assert "✓ store:" in out


@pytest.mark.agent
async def test_check_reaches_the_platforms(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    async with FakeTelegram() as telegram, FakeSlack() as slack:
        env = cli_env(
            tmp_path,
            agent_home,
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_APP_TOKEN=slack.app_token,
            SLACK_API_BASE_URL=slack.base_url,
            PI_BRIDGE_ALLOW_EVERYONE="true",
        )
        good = await run_cli(tmp_path, env, "check")
        bad = await run_cli(
            tmp_path,
            env | {"TELEGRAM_BOT_TOKEN": "999:wrong-token-xyz", "SLACK_BOT_TOKEN": "xoxb-wrong"},
            "check",
        )
    out = good.stdout.decode()
    assert good.returncode == 0, out + good.stderr.decode()
    assert "✓ telegram:" in out
    assert "✓ slack:" in out
    # No allowlists, on purpose: check says so, and passes.
    assert "⚠ allowlist: telegram lets everyone in" in out
    assert "⚠ allowlist: slack lets everyone in" in out
    out = bad.stdout.decode()
    assert bad.returncode == 1
    assert "✗ telegram:" in out
    assert "✗ slack:" in out
    assert "wrong-token-xyz" not in out + bad.stderr.decode()


@pytest.mark.parametrize(
    ("without", "line"),
    [
        (("commands",), "✓ slack: .*without commands \\(the /pi command\\): add them"),
        (("chat:write", "commands"), "✗ slack: the bot token lacks the scopes chat:write: add"),
    ],
    ids=["an optional scope", "a required scope"],
)
async def test_check_names_the_slack_scopes_an_older_app_lacks(
    tmp_path: Path, without: tuple[str, ...], line: str
) -> None:
    async with FakeSlack() as slack:
        slack.scopes = [s for s in slack.scopes if s not in without]
        env = cli_env(
            tmp_path,
            None,
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_APP_TOKEN=slack.app_token,
            SLACK_API_BASE_URL=slack.base_url,
            SLACK_ALLOWED_USERS="U1",
        )
        done = await run_cli(tmp_path, env, "check")
    out = done.stdout.decode()
    assert re.search(line, out), out


@pytest.mark.agent
async def test_console_answers_two_lines_then_exits_on_eof(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("apples", Reply(text="Apples are red."))
    env = cli_env(tmp_path, agent_home)
    done = await run_cli(tmp_path, env, "console", stdin=b"tell me about apples\n/status\n")
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    # Streamed: the answer may arrive as appended pieces on separate lines.
    assert "Apples are" in out
    assert "red." in out
    assert "tokens:" in out  # the /status answer
    assert "Traceback" not in done.stderr.decode()
    assert not agent_processes(tmp_path)


@pytest.mark.agent
async def test_sigterm_drains_and_exits_zero(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("plums", Reply(text="Plums are purple."))
    config = write_config(tmp_path, f"[limits]\ndrain_timeout = {DRAIN}\n")
    port = free_port()
    env = cli_env(tmp_path, agent_home, PI_BRIDGE_CONFIG=config, PI_BRIDGE_METRICS_PORT=str(port))
    async with await anyio.open_process(
        command("run"), cwd=tmp_path, env=env, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send(b"tell me about plums\n")
        seen = b""
        with anyio.fail_after(60):
            while b"purple." not in seen:
                seen += await process.stdout.receive()
        assert agent_processes(tmp_path)  # the agent is alive; stdin stays open
        health, metrics = await get(port, "/healthz"), await get(port, "/metrics")
        assert health == (200, '{"status": "ok", "platforms": ["console"]}')
        assert metrics[0] == 200
        assert 'pi_bridge_live_agents{platform="console"} 1' in metrics[1]
        assert 'pi_bridge_inbound_messages_total{platform="console"} 1' in metrics[1]
        assert 'pi_bridge_platform_calls_total{platform="console",method="send"}' in metrics[1]
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(DRAIN + 20):
            code = await process.wait()
        assert code == 0
        assert time.monotonic() - started < DRAIN + 20
    assert not agent_processes(tmp_path)


@pytest.mark.agent
async def test_run_serves_telegram_and_stops_on_sigterm(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("figs", Reply(text="Figs are sweet."))
    config = write_config(
        tmp_path, f"[limits]\ndrain_timeout = {DRAIN}\n[telegram]\npoll_timeout = 1\n"
    )
    async with FakeTelegram() as telegram:
        env = cli_env(
            tmp_path,
            agent_home,
            PI_BRIDGE_CONFIG=config,
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
            TELEGRAM_ALLOWED_USERS="42",
        )
        async with await anyio.open_process(
            command("run"), cwd=tmp_path, env=env, stdin=subprocess.DEVNULL
        ) as process:
            telegram.message(42, "tell me about figs")
            await telegram.bot_message("Figs are sweet.", 42, within=60)
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(DRAIN + 20):
                code = await process.wait()
            assert process.stderr is not None
            err = (await process.stderr.receive()).decode() if code else ""
        assert code == 0, err
    assert not agent_processes(tmp_path)


@pytest.mark.agent
async def test_check_names_a_transcription_endpoint_unreachable_or_refusing_the_key(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    async with FakeTranscriber() as heard:
        env = cli_env(
            tmp_path,
            agent_home,
            PI_BRIDGE_TRANSCRIBE_URL=heard.url,
            PI_BRIDGE_TRANSCRIBE_KEY_ENV="WHISPER_KEY",
            WHISPER_KEY=heard.key,
        )
        good = await run_cli(tmp_path, env, "check")
        wrong = await run_cli(tmp_path, env | {"WHISPER_KEY": "sk-wrong-key"}, "check")
    gone = await run_cli(
        tmp_path, env | {"PI_BRIDGE_TRANSCRIBE_URL": f"http://127.0.0.1:{free_port()}"}, "check"
    )
    assert good.returncode == 0, good.stdout.decode() + good.stderr.decode()
    assert "✓ transcription:" in good.stdout.decode()
    assert wrong.returncode == 1
    assert "✗ transcription:" in wrong.stdout.decode()
    assert "refused the key" in wrong.stdout.decode()
    assert "sk-wrong-key" not in wrong.stdout.decode() + wrong.stderr.decode()
    assert gone.returncode == 1
    assert "✗ transcription:" in gone.stdout.decode()
    assert heard.clips == []  # a check sends no clip

"""The deploy files, checked by the validators this machine has and against the code.

`docker compose config` (or Debian's docker-compose) parses the compose file,
`systemd-analyze verify` the unit; the Slack manifest is parsed and must grant
every scope the Slack adapter's API calls and events need, so adding a call
without its scope fails here rather than in a workspace. Where a validator is
not installed its test is skipped, saying which package brings it
(deploy/dev-setup.sh installs them on Debian).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from bridge.app.cli import EXIT_CONFIG
from bridge.app.config import LimitsSection
from tests.support.agents import DEFAULT_VERSION
from tests.support.paths import REPO

if TYPE_CHECKING:
    from pathlib import Path

DEPLOY = REPO / "deploy"
DRAIN = LimitsSection().drain_timeout

# Slack Web API method (as slack_sdk names it) → the bot scope it needs; None: no scope.
METHOD_SCOPES: dict[str, str | None] = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_delete": "chat:write",
    "chat_postEphemeral": "chat:write",
    # Native answer streams (docs.slack.dev/reference/methods/chat.startStream, …).
    "chat_startStream": "chat:write",
    "chat_appendStream": "chat:write",
    "chat_stopStream": "chat:write",
    # The thread's status line: chat:write since March 2026 (assistant:write before).
    "assistant_threads_setStatus": "chat:write",
    "files_upload_v2": "files:write",
    "files_delete": "files:write",
    "reactions_add": "reactions:write",
    "reactions_remove": "reactions:write",
    "usergroups_users_list": "usergroups:read",
    "conversations_open": "im:write",  # approvers' copies of approval questions
    "views_open": None,
    "auth_test": None,
}
# Event the runner subscribes to → its scope.
EVENT_SCOPES = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
}


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|min)?", value.strip())
    assert match, value
    return int(match.group(1)) * (60 if match.group(2) == "min" else 1)


# --- compose ---------------------------------------------------------------------------


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def _resolved(tmp_path: Path, *profiles: str) -> dict[str, Any]:
    """The compose file as `config` resolves it, with `profiles` active."""
    compose = _compose_command()
    if compose is None:
        pytest.skip("no `docker compose` or docker-compose (Debian package docker-compose)")
    # The file expects deploy/bridge.env (the operator's secrets): an empty one will do.
    (tmp_path / "deploy").mkdir()
    shutil.copy(DEPLOY / "compose.yaml", tmp_path / "deploy" / "compose.yaml")
    env = "TELEGRAM_BOT_TOKEN=1:x\nREDIS_PASSWORD=pw\nPI_BRIDGE_STORE=redis://:pw@redis:6379/0\n"
    (tmp_path / "deploy" / "bridge.env").write_text(env)
    active = [arg for profile in profiles for arg in ("--profile", profile)]
    done = subprocess.run(
        [*compose, "-p", "pi-bridge", "-f", "deploy/compose.yaml", *active, "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    resolved: dict[str, Any] = yaml.safe_load(done.stdout)
    return resolved


def _volumes(service: dict[str, Any]) -> dict[str, str]:
    """Mount target → source; docker compose v2 resolves volumes to mappings, Debian's
    docker-compose to strings."""
    pairs = [
        (v["target"], v["source"]) if isinstance(v, dict) else tuple(v.split(":")[1::-1])
        for v in service["volumes"]
    ]
    return dict(pairs)


def test_the_compose_file_is_valid_and_stores_in_redis(tmp_path: Path) -> None:
    resolved = _resolved(tmp_path)
    bridge, redis = resolved["services"]["bridge"], resolved["services"]["redis"]
    assert bridge["environment"]["PI_BRIDGE_STORE"] == "redis://:pw@redis:6379/0"
    assert bridge["environment"]["PI_BRIDGE_DATA_DIR"] == "/data"
    assert bridge["environment"]["TELEGRAM_BOT_TOKEN"] == "1:x"  # from the env file
    assert "/data" in _volumes(bridge)
    assert "appendonly" in " ".join(redis["command"])  # state survives a Redis restart
    # The agents have the network: a Redis they could reach must want the password.
    # (`config` prints the command still escaped for compose: `$${...}`)
    assert re.search(r'--requirepass "\$\$?\{REDIS_PASSWORD:\?', " ".join(redis["command"]))
    assert redis["environment"]["REDIS_PASSWORD"] == "pw"
    assert "seccomp:unconfined" in bridge["security_opt"]  # bwrap needs user namespaces
    assert "redis" in bridge["depends_on"]
    # Compose kills after the grace period: it must outlast the drain.
    assert _seconds(str(bridge["stop_grace_period"])) > DRAIN
    # The default: what `up` starts without a profile.
    assert "profiles" not in bridge
    assert "profiles" not in redis


SCALE_ROLES = {
    "frontend-1": "frontend",
    "frontend-2": "frontend",
    "worker-1": "worker",
    "worker-2": "worker",
}


def test_the_scale_profile_runs_frontends_and_workers_on_one_redis_and_one_volume(
    tmp_path: Path,
) -> None:
    services: dict[str, Any] = _resolved(tmp_path, "scale")["services"]
    assert SCALE_ROLES.keys() <= services.keys()
    bridge = services["bridge"]
    sources = set()
    for name, role in SCALE_ROLES.items():
        service = services[name]
        assert service["profiles"] == ["scale"], name
        assert service["image"] == bridge["image"], name
        env = service["environment"]
        assert env["PI_BRIDGE_ROLE"] == role, name
        assert env["PI_BRIDGE_STORE"] == "redis://:pw@redis:6379/0", name  # from the env file
        assert (env["PI_BRIDGE_METRICS_PORT"], env["PI_BRIDGE_METRICS_HOST"]) == (
            "9100",
            "0.0.0.0",
        )
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
        assert "seccomp:unconfined" in service["security_opt"], name
        assert env["PI_BRIDGE_DATA_DIR"] == "/data", name
        sources.add(_volumes(service)["/data"])
        assert _seconds(str(service["stop_grace_period"])) > DRAIN, name
    # Workers resume each other's sessions: one volume for all, the one `bridge` uses.
    assert sources == {_volumes(bridge)["/data"]}
    # A worker's name is its hostname: each needs its own.
    hostnames = [services[name].get("hostname") for name in SCALE_ROLES]
    assert None not in hostnames
    assert len(set(hostnames)) == len(hostnames)


# --- systemd -----------------------------------------------------------------------------

# systemd < 254 does not know these (the unit says so); nothing else may be reported.
NEWER_KEYS = ("RestartSteps", "RestartMaxDelaySec")


def _unit() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (DEPLOY / "pi-bridge.service").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def test_the_systemd_unit_verifies_and_outlasts_the_drain(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze (Debian package systemd)")
    unit = (DEPLOY / "pi-bridge.service").read_text()
    installed = "/opt/pi-chat-bridge/.venv/bin/pi-bridge"
    assert f"ExecStart={installed} run" in unit
    # verify checks that ExecStart is executable: point it at this checkout's.
    local = REPO / ".venv" / "bin" / "pi-bridge"
    if not local.exists():
        pytest.skip("no .venv/bin/pi-bridge: run deploy/dev-setup.sh")
    copy = tmp_path / "pi-bridge.service"
    copy.write_text(unit.replace(installed, str(local)))
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    complaints = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and not any(f"Unknown key '{k}'" in line for k in NEWER_KEYS)
    ]
    assert complaints == []
    assert done.returncode == 0

    values = _unit()
    assert _seconds(values["TimeoutStopSec"]) > DRAIN
    # SIGTERM to the bridge only; its agents' hosts outlive a restart (on_stop = "detach").
    assert values["KillMode"] == "process"
    assert values["RestartPreventExitStatus"] == str(EXIT_CONFIG)
    assert values["Restart"] == "on-failure"


# --- Slack manifest ------------------------------------------------------------------------


def _manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "slack-app-manifest.yaml").read_text())
    return loaded


def _methods_called() -> set[str]:
    """The Web API methods the Slack adapter calls through its client."""
    source = "\n".join(p.read_text() for p in (REPO / "adapters" / "slack").glob("*.py"))
    found = set(re.findall(r"client\.([a-z]+_[A-Za-z0-9_]+)\b", source))
    return found - {"base_url"}  # an attribute of the client (the download check), no method


def test_the_slack_manifest_grants_every_scope_the_adapter_uses() -> None:
    manifest = _manifest()
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    called = _methods_called()
    unknown = called - METHOD_SCOPES.keys()
    assert not unknown, f"add these Slack methods and their scopes to METHOD_SCOPES: {unknown}"
    assert called >= {"chat_postMessage", "chat_update", "reactions_add", "views_open"}
    needed = {METHOD_SCOPES[m] for m in called} - {None}
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert events == EVENT_SCOPES.keys()
    needed |= {EVENT_SCOPES[e] for e in events}
    needed.add("files:read")  # images people attach are downloaded with the bot token
    assert needed <= scopes, f"missing scopes: {needed - scopes}"


def test_the_slack_manifest_grants_the_scopes_pi_bridge_check_looks_for() -> None:
    from adapters.slack.scopes import OPTIONAL, REQUIRED

    granted = set(_manifest()["oauth_config"]["scopes"]["bot"])
    assert granted == REQUIRED.keys() | OPTIONAL.keys()


def test_the_slack_manifest_declares_the_slash_command_the_adapter_answers() -> None:
    from adapters.slack.slash import COMMAND

    manifest = _manifest()
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == [COMMAND]
    assert "commands" in manifest["oauth_config"]["scopes"]["bot"]


def test_the_slack_manifest_uses_socket_mode_with_interactivity() -> None:
    settings = _manifest()["settings"]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True  # buttons and answer forms
    assert _manifest()["features"]["app_home"]["messages_tab_enabled"] is True  # DMs


# --- Dockerfile ------------------------------------------------------------------------------


def test_the_dockerfile_runs_as_a_user_with_a_data_volume_and_a_health_check() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users
    assert users[-1] not in ("root", "0")
    assert re.search(r'^VOLUME \["/data"\]', text, re.M)
    assert re.search(r"^HEALTHCHECK .*\n?.*healthz", text, re.M)
    pinned = re.search(r"^ARG PI_VERSION=(\S+)", text, re.M)
    assert pinned is not None
    assert pinned.group(1) == DEFAULT_VERSION  # the agent the tests run
    # What every agent's sandbox needs (docs/security.md): bwrap, pasta for its own
    # network, and the non-dumpable library built where the bridge is installed.
    assert re.search(r"apt-get install[^\n]*bubblewrap[^&]*passt", text)
    assert "python -m bridge.rpc.nodump" in text

"""The agent's environment keeps what pi needs and none of the bridge's secrets, and
`classify` tells the protocol profiles apart from what `get_state` answered.

The agent runs arbitrary shell commands for whoever chats with it, so bot tokens,
signing secrets and store passwords must never reach it, not even when an operator
lists them by mistake.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from bridge.rpc.commands import Outgoing
from bridge.rpc.env import BASE_ALLOWLIST, SecretInAgentEnv, agent_environment, is_bridge_secret
from bridge.rpc.profile import ATOMIC, EARENDIL, LEGACY, LEGACY_COMMANDS, PI, Profile, classify
from tests.support.paths import TRANSCRIPTS

# The bridge's own secrets and settings (docs/design.md, "Configuration").
BRIDGE_SECRETS = {
    "TELEGRAM_BOT_TOKEN": "123456:telegram-secret",
    "TELEGRAM_API_BASE_URL": "http://127.0.0.1:8081",
    "TELEGRAM_ALLOWED_USERS": "1,2",
    "SLACK_BOT_TOKEN": "xoxb-slack-secret",
    "SLACK_APP_TOKEN": "xapp-slack-secret",
    "SLACK_SIGNING_SECRET": "slack-signing-secret",
    "PI_BRIDGE_STORE": "redis://:redis-password@redis:6379/0",
    "PI_BRIDGE_CONFIG": "/etc/pi-bridge.toml",
    "PI_BRIDGE_AGENT_ENV": "OPENAI_API_KEY",
    "REDIS_PASSWORD": "redis-password",
    "REDIS_URL": "redis://:redis-password@redis:6379/0",
}

# What pi needs to start and find its config (PATH for `#!/usr/bin/env node`).
AGENT_NEEDS = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/bridge",
    "LANG": "C.UTF-8",
    "PI_CODING_AGENT_DIR": "/home/bridge/.pi/agent",
    "PI_OFFLINE": "1",
}

OTHER = {
    "OPENAI_API_KEY": "sk-provider-key",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "LD_PRELOAD": "/tmp/evil.so",
    "PYTHONPATH": "/srv/bridge",
}

SOURCE = {**BRIDGE_SECRETS, **AGENT_NEEDS, **OTHER}


def test_the_agent_keeps_path_home_and_the_other_allowlisted_names() -> None:
    env = agent_environment(SOURCE)
    assert env == AGENT_NEEDS


def test_every_allowlisted_name_present_is_passed_through() -> None:
    source = {name: f"value of {name}" for name in BASE_ALLOWLIST}
    assert agent_environment({**source, **BRIDGE_SECRETS}) == source


@pytest.mark.parametrize("name", sorted(BRIDGE_SECRETS))
def test_a_bridge_secret_never_reaches_the_agent(name: str) -> None:
    env = agent_environment(SOURCE, extra_names=["OPENAI_API_KEY"])
    assert name not in env
    assert BRIDGE_SECRETS[name] not in env.values()


@pytest.mark.parametrize("name", sorted(BRIDGE_SECRETS))
def test_listing_a_bridge_secret_for_the_agent_is_refused(name: str) -> None:
    with pytest.raises(SecretInAgentEnv, match=name):
        agent_environment(SOURCE, extra_names=["OPENAI_API_KEY", name])


@pytest.mark.parametrize("name", sorted(BRIDGE_SECRETS))
def test_overriding_a_bridge_secret_for_the_agent_is_refused(name: str) -> None:
    with pytest.raises(SecretInAgentEnv, match=name):
        agent_environment(SOURCE, overrides={name: "anything"})


def test_a_refusal_names_every_refused_secret_and_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="SLACK_APP_TOKEN, TELEGRAM_BOT_TOKEN") as caught:
        agent_environment(SOURCE, extra_names=[" TELEGRAM_BOT_TOKEN ", "SLACK_APP_TOKEN"])
    assert isinstance(caught.value, SecretInAgentEnv)
    for secret in BRIDGE_SECRETS.values():
        assert secret not in str(caught.value)


DISCORD = {
    "DISCORD_BOT_TOKEN": "discord-bot-token-secret",
    "DISCORD_API_URL": "http://127.0.0.1:9/api/v10",
    "DISCORD_ALLOWED_USERS": "123",
}


@pytest.mark.parametrize("name", sorted(DISCORD))
def test_discords_token_and_api_url_never_reach_the_agent_even_when_listed(name: str) -> None:
    # DISCORD_API_URL matches no token pattern: only the platform's own prefix refuses it.
    assert name not in agent_environment({**SOURCE, **DISCORD})
    with pytest.raises(SecretInAgentEnv, match=name):
        agent_environment({**SOURCE, **DISCORD}, extra_names=[name])
    with pytest.raises(SecretInAgentEnv, match=name):
        agent_environment(SOURCE, overrides={name: DISCORD[name]})


@pytest.mark.parametrize(
    ("extra_names", "overrides", "expected"),
    [
        ([], None, AGENT_NEEDS),
        (["OPENAI_API_KEY"], None, {**AGENT_NEEDS, "OPENAI_API_KEY": "sk-provider-key"}),
        (
            [" OPENAI_API_KEY ", "", "  "],
            None,
            {**AGENT_NEEDS, "OPENAI_API_KEY": "sk-provider-key"},
        ),
        (["NOT_SET_ANYWHERE"], None, AGENT_NEEDS),
        ([], {"HOME": "/tmp/agent-home"}, {**AGENT_NEEDS, "HOME": "/tmp/agent-home"}),
        ([], {"PI_TELEMETRY": "0"}, {**AGENT_NEEDS, "PI_TELEMETRY": "0"}),
        (
            ["OPENAI_API_KEY"],
            {"OPENAI_API_KEY": "sk-other"},
            {**AGENT_NEEDS, "OPENAI_API_KEY": "sk-other"},
        ),
    ],
    ids=[
        "allowlist-only",
        "listed-provider-key",
        "names-trimmed-blanks-ignored",
        "listed-but-unset",
        "override-wins",
        "override-adds",
        "override-beats-listed",
    ],
)
def test_listed_names_and_overrides_shape_the_environment(
    extra_names: list[str], overrides: dict[str, str] | None, expected: dict[str, str]
) -> None:
    assert agent_environment(SOURCE, extra_names, overrides) == expected


def test_the_source_mapping_is_left_alone() -> None:
    source = dict(SOURCE)
    agent_environment(source, ["OPENAI_API_KEY"], {"HOME": "/elsewhere"})
    assert source == SOURCE


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("TELEGRAM_BOT_TOKEN", True),
        ("TELEGRAM_FILE_BASE_URL", True),
        ("SLACK_BOT_TOKEN", True),
        ("SLACK_APP_TOKEN", True),
        ("SLACK_SIGNING_SECRET", True),
        ("SLACK_APPROVERS", True),
        ("PI_BRIDGE_STORE", True),
        ("PI_BRIDGE_METRICS_PORT", True),
        ("REDIS_PASSWORD", True),
        ("REDIS_URL", True),
        ("DISCORD_BOT_TOKEN", True),
        ("GITHUB_APP_TOKEN", True),
        ("MY_SIGNING_SECRET_2", True),
        ("PATH", False),
        ("HOME", False),
        ("PI_CODING_AGENT_DIR", False),
        ("PI_OFFLINE", False),
        ("ATOMIC_CODING_AGENT_DIR", False),
        ("OPENAI_API_KEY", False),
        ("GITHUB_TOKEN", False),
        ("MY_REDIS_HOST", False),
        ("PI_BRIDGEWAY", False),
    ],
)
def test_a_name_is_a_bridge_secret_by_its_pattern(name: str, secret: bool) -> None:
    assert is_bridge_secret(name) is secret


def test_no_allowlisted_name_looks_like_a_bridge_secret() -> None:
    assert [n for n in sorted(BASE_ALLOWLIST) if is_bridge_secret(n)] == []


# --- profiles -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "knows_new_commands", "expected"),
    [
        ({}, False, PI),
        ({}, True, EARENDIL),
        ({"isStreaming": False, "steeringMode": "all"}, False, PI),
        ({"isStreaming": False, "steeringMode": "all"}, True, EARENDIL),
        ({"queuedMessagesPaused": False}, True, ATOMIC),
        ({"queuedMessagesPaused": True}, True, ATOMIC),
        ({"queuedMessagesPaused": False}, False, ATOMIC),
    ],
    ids=[
        "empty-old",
        "empty-new",
        "pi-0.7x",
        "earendil-0.8x",
        "atomic",
        "atomic-paused",
        "atomic-even-without-new-commands",
    ],
)
def test_classify_tells_the_profiles_apart(
    state: dict[str, Any], knows_new_commands: bool, expected: Profile
) -> None:
    assert classify(state, knows_new_commands) is expected


def recorded_state(folder: str) -> dict[str, Any]:
    """The data of the first successful get_state answer in the folder's a_plain."""
    path = TRANSCRIPTS / folder / "a_plain.stdout.jsonl"
    if not path.is_file():
        pytest.skip(f"the recorded transcripts are not next to this checkout ({path})")
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            record = json.loads(line)
            if record.get("command") == "get_state" and record.get("success"):
                data: dict[str, Any] = record["data"]
                return data
    pytest.fail(f"no get_state answer in {path}")


@pytest.mark.parametrize(
    ("folder", "knows_new_commands", "expected"),
    [("v0731", False, PI), ("e0871", True, EARENDIL), ("atomic", True, ATOMIC)],
    ids=["pi-0.73.1", "earendil-0.87.1", "atomic"],
)
def test_classify_recognises_each_recorded_agent(
    folder: str, knows_new_commands: bool, expected: Profile
) -> None:
    # get_available_thinking_levels succeeds on 0.8x and atomic only (docs/rpc.md, "Profiles").
    assert classify(recorded_state(folder), knows_new_commands) is expected


@pytest.mark.parametrize(
    ("profile", "flags"),
    [
        (PI, (True, False, False, True, False, False)),
        (EARENDIL, (True, True, True, True, False, False)),
        (ATOMIC, (True, True, True, True, False, False)),
        (LEGACY, (False, False, False, False, True, True)),
    ],
    ids=["pi", "earendil", "atomic", "legacy"],
)
def test_each_profile_has_the_differences_the_client_handles(
    profile: Profile, flags: tuple[bool, ...]
) -> None:
    assert (
        profile.responses,
        profile.settled_event,
        profile.clear_queue,
        profile.native_queue,
        profile.legacy_attachments,
        profile.is_legacy,
    ) == flags


def test_the_legacy_commands_are_commands_the_bridge_can_encode() -> None:
    encodable = {model.model_fields["type"].default for model in get_args(Outgoing)}
    legacy = set(LEGACY_COMMANDS)
    assert legacy == {"prompt", "abort", "compact"}
    assert legacy <= encodable

"""The environment's part of the configuration: which names set which TOML keys.

The names of docs/design.md are a stable contract; `ENV_NAMES` maps each (plus a few
operational extras) to its place in the TOML tree, and `env_tree` turns an
environment into that tree, to be merged over the file's. `SECRETS` are the keys
that may only come from the environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

# Secrets by their TOML location; they may only come from these environment names.
SECRETS: dict[tuple[str, ...], str] = {
    ("telegram", "bot_token"): "TELEGRAM_BOT_TOKEN",
    ("telegram", "webhook_secret"): "TELEGRAM_WEBHOOK_SECRET",
    ("slack", "bot_token"): "SLACK_BOT_TOKEN",
    ("slack", "app_token"): "SLACK_APP_TOKEN",
    ("slack", "signing_secret"): "SLACK_SIGNING_SECRET",
    ("discord", "bot_token"): "DISCORD_BOT_TOKEN",
}

# The environment contract (docs/design.md) plus a few operational extras, each
# mapped to its place in the TOML tree; "list" values are comma-separated.
ENV_NAMES: dict[str, tuple[tuple[str, ...], Literal["str", "list"]]] = {
    "PI_BRIDGE_DATA_DIR": (("data_dir",), "str"),
    "PI_BRIDGE_STORE": (("store",), "str"),
    "PI_BRIDGE_AGENT_COMMAND": (("agent", "command"), "str"),
    "PI_BRIDGE_AGENT_ENV": (("agent", "env"), "list"),
    "PI_BRIDGE_SANDBOX": (("sandbox", "mode"), "str"),
    "PI_BRIDGE_NETWORK": (("sandbox", "network"), "str"),
    "PI_BRIDGE_HOST_PORTS": (("sandbox", "host_ports"), "list"),
    "PI_BRIDGE_SANDBOX_USER": (("sandbox", "user"), "str"),
    "PI_BRIDGE_APPROVALS": (("approvals", "mode"), "str"),
    "PI_BRIDGE_ALLOW_EVERYONE": (("allow_everyone",), "str"),
    "PI_BRIDGE_MAX_PER_USER": (("limits", "max_per_user"), "str"),
    "PI_BRIDGE_ON_STOP": (("agents", "on_stop"), "str"),
    "PI_BRIDGE_ROLE": (("role",), "str"),
    "TELEGRAM_BOT_TOKEN": (("telegram", "bot_token"), "str"),
    "TELEGRAM_API_BASE_URL": (("telegram", "api_base_url"), "str"),
    "TELEGRAM_FILE_BASE_URL": (("telegram", "file_base_url"), "str"),
    "TELEGRAM_ALLOWED_USERS": (("telegram", "allowed_users"), "list"),
    "TELEGRAM_APPROVERS": (("telegram", "approvers"), "list"),
    "TELEGRAM_WEBHOOK_URL": (("telegram", "webhook_url"), "str"),
    "TELEGRAM_WEBHOOK_SECRET": (("telegram", "webhook_secret"), "str"),
    "TELEGRAM_WEBHOOK_LISTEN": (("telegram", "webhook_listen"), "str"),
    "TELEGRAM_WEBHOOK_PORT": (("telegram", "webhook_port"), "str"),
    "SLACK_BOT_TOKEN": (("slack", "bot_token"), "str"),
    "SLACK_APP_TOKEN": (("slack", "app_token"), "str"),
    "SLACK_SIGNING_SECRET": (("slack", "signing_secret"), "str"),
    "SLACK_API_BASE_URL": (("slack", "api_base_url"), "str"),
    "SLACK_ALLOWED_USERS": (("slack", "allowed_users"), "list"),
    "SLACK_APPROVERS": (("slack", "approvers"), "list"),
    "SLACK_ALLOWED_CHANNELS": (("slack", "allowed_channels"), "list"),
    "SLACK_HTTP_PORT": (("slack", "http_port"), "str"),
    "SLACK_HTTP_HOST": (("slack", "http_host"), "str"),
    "DISCORD_BOT_TOKEN": (("discord", "bot_token"), "str"),
    "DISCORD_ALLOWED_USERS": (("discord", "allowed_users"), "list"),
    "DISCORD_ALLOWED_ROLES": (("discord", "allowed_roles"), "list"),
    "DISCORD_APPROVERS": (("discord", "approvers"), "list"),
    "DISCORD_ALLOWED_CHANNELS": (("discord", "allowed_channels"), "list"),
    "DISCORD_API_URL": (("discord", "api_url"), "str"),
    "PI_BRIDGE_TRANSCRIBE_URL": (("transcribe", "url"), "str"),
    "PI_BRIDGE_TRANSCRIBE_MODEL": (("transcribe", "model"), "str"),
    "PI_BRIDGE_TRANSCRIBE_KEY_ENV": (("transcribe", "key_env"), "str"),
    "PI_BRIDGE_METRICS_PORT": (("metrics", "port"), "str"),
    "PI_BRIDGE_METRICS_HOST": (("metrics", "host"), "str"),
    "PI_BRIDGE_LOG_LEVEL": (("log", "level"), "str"),
    "PI_BRIDGE_LOG_FORMAT": (("log", "format"), "str"),
}


def env_tree(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """(nested values, {TOML path: environment name}) from the contract's names.

    Empty values count as unset: compose files and unit files often carry `NAME=`.
    """
    tree: dict[str, Any] = {}
    origin: dict[tuple[str, ...], str] = {}
    for name, (path, kind) in ENV_NAMES.items():
        raw = env.get(name, "").strip()
        if not raw:
            continue
        value: Any = [p.strip() for p in raw.split(",") if p.strip()] if kind == "list" else raw
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
        origin[path] = name
    return tree, origin

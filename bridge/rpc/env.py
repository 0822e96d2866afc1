"""The agent's environment, built from an allowlist.

The agent runs arbitrary shell commands for whoever chats with it, so it must
never see the bridge's own secrets (bot tokens, signing secrets, store
passwords). Only the names below, plus extra names an operator lists (provider
keys, say), are copied; names that look like the bridge's secrets are refused
even when listed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# PATH: pi's launcher is `#!/usr/bin/env node`; HOME: pi keeps its config there.
BASE_ALLOWLIST = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TMPDIR",
        "TERM",
        "PI_CODING_AGENT_DIR",
        "ATOMIC_CODING_AGENT_DIR",
        "PI_OFFLINE",
        "PI_SKIP_VERSION_CHECK",
        "PI_TELEMETRY",
    }
)

_BRIDGE_SECRET = re.compile(
    r"^(TELEGRAM_.*|SLACK_.*|DISCORD_.*|PI_BRIDGE_.*|REDIS_.*|.*_(BOT|APP)_TOKEN|.*SIGNING_SECRET.*)$",
    re.IGNORECASE,  # settings loaders match names case-insensitively; so must the refusal
)


class SecretInAgentEnv(ValueError):
    """An operator asked to pass one of the bridge's own secrets to the agent."""


def is_bridge_secret(name: str) -> bool:
    return bool(_BRIDGE_SECRET.match(name))


def agent_environment(
    source: Mapping[str, str],
    extra_names: Iterable[str] = (),
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for an agent: allowlisted names from `source`, then overrides."""
    extra = frozenset(n.strip() for n in extra_names if n.strip())
    refused = sorted(n for n in extra | set(overrides or {}) if is_bridge_secret(n))
    if refused:
        raise SecretInAgentEnv(
            f"refusing to pass the bridge's own secrets to the agent: {', '.join(refused)}"
        )
    allowed = BASE_ALLOWLIST | extra
    env = {k: v for k, v in source.items() if k in allowed}
    env.update(overrides or {})
    return env

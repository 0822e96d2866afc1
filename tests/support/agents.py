"""Helpers to run the real pi agents (installed by deploy/install-agents.sh) in tests.

Every agent gets its own throwaway home whose `models.json` defines a provider
"fake" pointing at a `FakeLLM` on 127.0.0.1, and a minimal environment with no
provider API keys, so nothing leaves the machine.

The legacy agent (0.13.2) reads the same files: `$PI_CODING_AGENT_DIR/models.json`
(validated by a schema that tolerates the newer `compat` key) and `settings.json`
(`defaultProvider` / `defaultModel`; it ignores `quietStartup`), and accepts the
same `--mode rpc --provider fake --model fake-model` flags. It has no `--version`,
`--session-dir` or `-e`: unknown flags are ignored, and without `--mode` it starts
its interactive TUI, which tries to download `fd` from the internet.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

AGENT_VERSIONS = ("0.73.1", "0.87.1", "1.5.2")  # the current RPC protocol
LEGACY_VERSION = "0.13.2"  # the old protocol: prompt/abort/compact only, no responses
DEFAULT_VERSION = "0.73.1"
ALL_VERSIONS = (*AGENT_VERSIONS, LEGACY_VERSION)
# The containment tests (tests/containment/test_tool_reach.py) hold on every pinned agent.
CONTAINMENT_VERSIONS = AGENT_VERSIONS

PACKAGES = {
    "0.73.1": "@mariozechner/pi-coding-agent",
    "0.87.1": "@earendil-works/pi-coding-agent",
    "1.5.2": "@earendil-works/pi-coding-agent",
    "0.13.2": "@mariozechner/pi-coding-agent",
}

# Who the suite's sandboxed agents run as when it runs as root (as in CI): kept root on
# purpose (`[sandbox] user = "root"`), because the suite keeps them where an unprivileged
# user cannot reach (pytest's 0700 temporary folders, an interpreter in root's home).
# tests/containment/test_agent_user.py runs a real agent as the default unprivileged user instead.
SUITE_USER = "root"

PROVIDER = "fake"
MODEL = "fake-model"
API_KEY = "fake-key"
SETUP_HINT = "run `bash deploy/dev-setup.sh` (or deploy/install-agents.sh) from the repository root"


def repo_root() -> Path:
    """The repository root (this file is tests/support/agents.py)."""
    return Path(__file__).resolve().parents[2]


def agents_dir() -> Path:
    """Where deploy/install-agents.sh put the agents: $PI_BRIDGE_AGENTS_DIR or <repo>/.agents."""
    configured = os.environ.get("PI_BRIDGE_AGENTS_DIR")
    return Path(configured).resolve() if configured else repo_root() / ".agents"


def agent_bin(version: str) -> Path:
    """The launcher wrapper for an agent version (it execs the right node itself)."""
    return agents_dir() / "bin" / f"pi-{version}"


def package_dir(version: str) -> Path:
    """The installed npm package of an agent version."""
    try:
        package = PACKAGES[version]
    except KeyError:
        raise ValueError(f"unknown agent version {version!r}: one of {sorted(PACKAGES)}") from None
    return agents_dir() / f"pi-{version}" / "node_modules" / package


def agent_installed(version: str) -> bool:
    """Whether the wrapper exists and the installed package has exactly this version."""
    wrapper = agent_bin(version)
    if not (wrapper.is_file() and os.access(wrapper, os.X_OK)):
        return False
    try:
        meta = json.loads((package_dir(version) / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("version") == version


def extension_path(version: str, name: str) -> Path:
    """One of pi's example extensions shipped in the npm package, e.g. "permission-gate.ts".

    Raises FileNotFoundError when the agent is installed but has no such example.
    """
    path = package_dir(version) / "examples" / "extensions" / name
    if agent_installed(version) and not path.exists():
        raise FileNotFoundError(f"pi {version} ships no example extension {name!r} ({path})")
    return path


PRICES = {"input": 100.0, "output": 400.0, "cacheRead": 10.0, "cacheWrite": 125.0}


def models_config(llm_base_url: str) -> dict[str, object]:
    """models.json content: one provider "fake" with one model "fake-model"."""
    model = {
        "id": MODEL,
        "name": "Fake Model",
        "reasoning": False,
        "input": ["text", "image"],
        "contextWindow": 128000,
        "maxTokens": 4096,
        # Dollars per million tokens: not zero, so the agent's reported costs are real
        # numbers (usage and budgets, bridge/spend/).
        "cost": PRICES,
    }
    provider = {
        "baseUrl": llm_base_url,
        "api": "openai-completions",
        "apiKey": API_KEY,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [model],
    }
    return {"providers": {PROVIDER: provider}}


@dataclass(frozen=True)
class AgentHome:
    """A throwaway HOME and agent config dir for one agent (or several in one test)."""

    root: Path
    llm_base_url: str

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def agent_dir(self) -> Path:
        return self.home / "agent"

    def env(self) -> dict[str, str]:
        """The agent's whole environment: no API keys, nothing else from this process."""
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
            "LANG": "C.UTF-8",
        }

    def argv(self, version: str, *extra: str) -> list[str]:
        """Command line of an agent in RPC mode on the fake model (same flags for legacy)."""
        return [
            str(agent_bin(version)),
            "--mode",
            "rpc",
            "--provider",
            PROVIDER,
            "--model",
            MODEL,
            *extra,
        ]


def llm_ports(env: Mapping[str, str]) -> tuple[int, ...]:
    """The host loopback ports of the models an agent with `env` is configured for:
    what an isolated sandbox must let it reach (`[sandbox] host_ports`), as an operator
    lists a local model server's."""
    agent_dir = env.get("PI_CODING_AGENT_DIR")
    if not agent_dir:
        return ()
    try:
        providers = json.loads((Path(agent_dir) / "models.json").read_text())["providers"]
    except (OSError, ValueError, KeyError):
        return ()
    urls = [urlsplit(str(p.get("baseUrl", ""))) for p in providers.values()]
    return tuple(u.port for u in urls if u.hostname == "127.0.0.1" and u.port is not None)


def make_agent_home(root: Path, llm_base_url: str) -> AgentHome:
    """Write `root/home/agent/{models,settings}.json` for a fake LLM at `llm_base_url`."""
    agent_home = AgentHome(root=root, llm_base_url=llm_base_url)
    agent_home.agent_dir.mkdir(parents=True, exist_ok=True)
    models = models_config(llm_base_url)
    settings = {"defaultProvider": PROVIDER, "defaultModel": MODEL, "quietStartup": True}
    for name, content in (("models.json", models), ("settings.json", settings)):
        (agent_home.agent_dir / name).write_text(json.dumps(content, indent=2) + "\n", "utf-8")
    return agent_home

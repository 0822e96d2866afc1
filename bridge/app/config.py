"""The bridge's configuration: a TOML file plus environment overrides, validated once.

The file is `$PI_BRIDGE_CONFIG`, else `./pi-bridge.toml` when it exists, else
none (the embedded defaults: sqlite in ./data, the console). The environment
names of docs/design.md are a stable contract and override the file
(`bridge.app.environment`); secrets (bot tokens, the signing secret) are read only
from the environment, so a config file can be committed or mounted without leaking
them. The tree's shape is `bridge.app.schema`; its projects are checked and built
in `bridge.app.projects_config`.

`load_config()` reports every mistake at once as a `ConfigError` whose lines
name the setting (its TOML key, or its environment variable when it came from
there) and what is wrong with it; `Loaded` carries what the rest of the bridge
takes: `BridgeOptions` and the settings of each configured platform
(`bridge.app.platforms`).
"""

from __future__ import annotations

import logging
import os
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from adapters.slack.settings import SlackSettings
from adapters.telegram.settings import TelegramSettings
from bridge.app.environment import SECRETS, env_tree
from bridge.app.platforms import KEY_PREFIXES, configured, open_platforms, open_to_everyone
from bridge.app.projects_config import chat_project, project_options, push_tokens_kept
from bridge.app.schema import (
    BudgetLimitsSection,
    BudgetsSection,
    ChatSection,
    Config,
    LimitsSection,
)
from bridge.approvals.policy import check_patterns
from bridge.model import ConversationSettings, NotifySettings
from bridge.options import (
    AgentOptions,
    ApprovalOptions,
    BridgeOptions,
    ChatOptions,
    SandboxOptions,
    ScheduleOptions,
    Transcription,
)
from bridge.paths import default_agent_argv
from bridge.rpc.env import SecretInAgentEnv, agent_environment
from bridge.schedules.occurrences import known_zone
from bridge.spend.limits import Budgets, Limits

if TYPE_CHECKING:
    from collections.abc import Mapping

    from bridge.app.platforms import Configured

# Importers of these names from here predate the split into modules.
__all__ = ["Config", "ConfigError", "LimitsSection", "Loaded", "load_config", "open_platforms"]

log = logging.getLogger(__name__)

DEFAULT_FILE = "pi-bridge.toml"

X = TypeVar("X")


class ConfigError(Exception):
    """The configuration is unusable; `problems` are "setting: what is wrong" lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class Loaded:
    """The validated configuration, in the shapes the bridge and the adapters take."""

    config: Config
    source: Path | None  # the TOML file read, if any
    options: BridgeOptions
    served: tuple[Configured, ...] = ()  # the configured platforms, with their settings

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(platform.name for platform in self.served)

    def settings(self, kind: type[X]) -> X | None:
        """The settings of the configured platform whose settings are a `kind`."""
        return next((p.settings for p in self.served if isinstance(p.settings, kind)), None)

    # For readers that know which platform they mean (tests); the app loops over `served`.
    @property
    def telegram(self) -> TelegramSettings | None:
        return self.settings(TelegramSettings)

    @property
    def slack(self) -> SlackSettings | None:
        return self.settings(SlackSettings)


def config_path(env: Mapping[str, str], cwd: Path) -> Path | None:
    configured = env.get("PI_BRIDGE_CONFIG", "").strip()
    if configured:
        return Path(configured)
    default = cwd / DEFAULT_FILE
    return default if default.is_file() else None


def load_config(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Loaded:
    """Read, merge and validate everything; raise ConfigError listing every problem."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    path = config_path(env, cwd)
    data = _read_toml(path) if path is not None else {}
    where = f" in {path}" if path is not None else ""
    problems = [
        f"{'.'.join(p)}{where}: secrets are read only from the environment; "
        f"remove it and set {name} instead"
        for p, name in SECRETS.items()
        if _lookup(data, p) is not None
    ]
    for p in SECRETS:
        _remove(data, p)
    store = data.get("store")
    if isinstance(store, str) and _has_credentials(store):
        # Credentials in a store URL are as secret as a bot token.
        problems.append(
            f"store{where}: the URL carries a password; "
            "put the whole URL in PI_BRIDGE_STORE instead"
        )
        del data["store"]
    overrides, origin = env_tree(env)
    try:
        config = Config(**_merge(data, overrides))
    except ValidationError as exc:
        problems += [_describe(err, origin, where) for err in exc.errors()]
        raise ConfigError(problems) from None
    if problems:
        raise ConfigError(problems)
    return _build(config, path, env, cwd, origin, where)


def _has_credentials(url: str) -> bool:
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return False  # reported by the store's own validation
    return "@" in netloc or "password=" in url.lower()


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, table by table (an env override keeps the file's siblings)."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError([f"PI_BRIDGE_CONFIG: no such file {str(path)!r}"]) from None
    except OSError as exc:
        raise ConfigError([f"PI_BRIDGE_CONFIG: cannot read {str(path)!r}: {exc}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{path}: not valid TOML: {exc}"]) from None


def _lookup(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _remove(data: dict[str, Any], path: tuple[str, ...]) -> None:
    parent = _lookup(data, path[:-1])
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def _describe(error: Any, origin: Mapping[tuple[str, ...], str], where: str) -> str:
    loc = tuple(str(part) for part in error["loc"])
    # Union members show up in the location ("str", "list[str]"): not the user's words.
    loc = tuple(p for p in loc if p not in ("str", "list[str]", "function-after[_http_url()]"))
    msg = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        msg = "unknown setting (a typo?)"
    for n in range(len(loc), 0, -1):
        if loc[:n] in origin:
            return f"{origin[loc[:n]]} (environment): {msg}"
    return f"{_dotted(loc)}{where}: {msg}" if loc else f"configuration{where}: {msg}"


def _dotted(path: tuple[str, ...]) -> str:
    """A TOML key path as written in the file (`chats."telegram:1".verbosity`)."""
    return ".".join(p if p.replace("_", "").replace("-", "").isalnum() else f'"{p}"' for p in path)


def _argv(value: str | list[str] | None, name: str, problems: list[str]) -> list[str] | None:
    if value is None:
        return None
    try:
        argv = shlex.split(value) if isinstance(value, str) else list(value)
    except ValueError as exc:
        problems.append(f"{name}: cannot split as a shell command: {exc}")
        return None
    if not argv or not argv[0]:
        problems.append(f"{name}: empty command")
        return None
    return argv


def _build(
    config: Config,
    path: Path | None,
    env: Mapping[str, str],
    cwd: Path,
    origin: Mapping[tuple[str, ...], str],
    where: str,
) -> Loaded:
    problems: list[str] = []

    def name(*p: str) -> str:
        return f"{origin[p]} (environment)" if p in origin else f"{'.'.join(p)}{where}"

    argv = _argv(config.agent.command, name("agent", "command"), problems)
    if argv is None and config.agent.command is None:
        argv = default_agent_argv()
    projects = project_options(config, cwd, where, problems)
    problems += _budget_chats(config, where)
    chats: dict[str, ChatOptions] = {}
    for key, chat in config.chats.items():
        if not key.startswith(KEY_PREFIXES):
            problems.append(
                f'chats."{key}"{where}: not a conversation key: they start with '
                f"{', '.join(KEY_PREFIXES)} (`/status` shows a conversation's key)"
            )
            continue
        chat_argv = _argv(chat.agent_command, f'chats."{key}".agent_command{where}', problems)
        workspace = chat.workspace
        if workspace is not None and not workspace.is_absolute():
            workspace = cwd / workspace
        chats[key] = ChatOptions(
            workspace=workspace,
            argv=tuple(chat_argv) if chat_argv else None,
            approvers=frozenset(chat.approvers),
            busy_policy=chat.busy_policy,
            verbosity=chat.verbosity,
            project=chat_project(key, chat, config, where, problems),
            timezone=_timezone(key, chat.timezone, where, problems),
            notify=_notify(config, chat),
            plan_first=chat.plan_first,
        )
    try:
        agent_env = agent_environment(env, config.agent.env)
    except SecretInAgentEnv as exc:
        problems.append(f"{name('agent', 'env')}: {exc}")
        agent_env = {}
    key_env = config.transcribe.key_env
    if key_env and key_env in agent_env:
        problems.append(f"{name('agent', 'env')}: refusing to pass the transcription key {key_env}")
    problems += push_tokens_kept(config, agent_env, name("agent", "env"))

    patterns = config.approvals.patterns
    problems += [f"{name('approvals', 'patterns')}: {p}" for p in check_patterns(patterns or [])]

    served = configured(config, problems)
    problems += open_to_everyone(config)
    if problems or argv is None:
        raise ConfigError(problems)

    data_dir = config.data_dir if config.data_dir.is_absolute() else cwd / config.data_dir
    limits = config.limits
    options = BridgeOptions(
        data_dir=data_dir.resolve(),
        agent=AgentOptions(
            argv=tuple(argv),
            env=agent_env,
            session_flags=config.agent.session_flags,
            sandbox=_sandbox(config, path, data_dir.resolve(), cwd),
        ),
        max_agents=limits.max_agents,
        max_per_user=limits.max_per_user,
        idle_timeout=limits.idle_timeout,
        max_run_time=limits.max_run_time,
        on_stop=config.agents.on_stop,
        detach_timeout=config.agents.detach_timeout,
        dialog_timeout=limits.dialog_timeout,
        drain_timeout=limits.drain_timeout,
        dedupe_ttl=limits.dedupe_ttl,
        inbox_size=limits.inbox_size,
        file_max_bytes=config.files.max_bytes,
        transcribe=_transcription(config, env),
        approvals=ApprovalOptions(
            mode=config.approvals.mode,
            patterns=tuple(patterns) if patterns is not None else None,
            notify_approvers=config.approvals.notify_approvers,
        ),
        settings=ConversationSettings(**config.defaults.model_dump()),
        notify=NotifySettings(**config.notify.model_dump()),
        chats=chats,
        projects=projects,
        schedules=ScheduleOptions(**config.schedules.model_dump()),
        budgets=_budgets(config.budgets),
    )
    return Loaded(config, path, options, served)


def _timezone(key: str, zone: str | None, where: str, problems: list[str]) -> str | None:
    if zone is not None and not known_zone(zone):
        problems.append(f'chats."{key}".timezone{where}: unknown time zone {zone!r}')
        return None
    return zone


def _notify(config: Config, chat: ChatSection) -> NotifySettings | None:
    """A chat's `[chats."<key>".notify]` over the bridge's `[notify]` (None: that one)."""
    if chat.notify is None:
        return None
    given = chat.notify.model_dump(exclude_unset=True)
    return NotifySettings(**{**config.notify.model_dump(), **given})


def _budget_chats(config: Config, where: str) -> list[str]:
    return [
        f'budgets.chats."{name}"{where}: not a chat: chats are named by their platform and '
        f"id, starting with {', '.join(KEY_PREFIXES)} (as /usage counts them)"
        for name in config.budgets.chats
        if not name.startswith(KEY_PREFIXES)
    ]


def _budgets(section: BudgetsSection) -> Budgets:
    def limits(table: BudgetLimitsSection) -> Limits:
        return Limits(table.daily, table.monthly, table.per_run)

    return Budgets(
        person=limits(section.person),
        chat=limits(section.chat),
        people={person: limits(table) for person, table in section.people.items()},
        chats={chat: limits(table) for chat, table in section.chats.items()},
        zone=ZoneInfo(section.time_zone),  # checked when the file loaded
        zone_name=section.time_zone,
        raise_step=section.raise_step,
    )


def _transcription(config: Config, env: Mapping[str, str]) -> Transcription | None:
    section = config.transcribe
    if not section.url.strip():
        return None
    key = env.get(section.key_env, "") if section.key_env else ""
    return Transcription(section.url.strip(), section.model, key)


def _sandbox(config: Config, path: Path | None, data_dir: Path, cwd: Path) -> SandboxOptions:
    section = config.sandbox
    # What no agent may see besides the data dir: this file, and a store kept elsewhere
    # (with its journal files, which exist while the bridge has it open).
    hidden = [path.resolve()] if path is not None else []
    scheme, _, rest = config.store.partition("://")
    if scheme.lower() == "sqlite" and rest:
        store = Path(rest).resolve()
        hidden += [store, *(store.with_name(store.name + s) for s in ("-wal", "-shm", "-journal"))]
    return SandboxOptions(
        mode=section.mode,
        network="host" if section.network == "on" else section.network,
        host_ports=tuple(dict.fromkeys(section.host_ports)),
        user=section.user.strip(),
        read_write=tuple((cwd / p).resolve() for p in section.read_write),
        read_only=tuple((cwd / p).resolve() for p in section.read_only),
        hidden=tuple(p for p in hidden if not p.is_relative_to(data_dir)),
    )

"""The bridge's configuration: a TOML file plus environment overrides, validated once.

The file is `$PI_BRIDGE_CONFIG`, else `./pi-bridge.toml` when it exists, else
none (the embedded defaults: sqlite in ./data, the console). The environment
names of docs/design.md are a stable contract and override the file; secrets
(bot tokens, the signing secret) are read only from the environment, so a
config file can be committed or mounted without leaking them.

`load_config()` reports every mistake at once as a `ConfigError` whose lines
name the setting (its TOML key, or its environment variable when it came from
there) and what is wrong with it; `Loaded` carries what the rest of the bridge
takes: `BridgeOptions` and the settings of each configured platform.
"""

from __future__ import annotations

import logging
import os
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from adapters.slack.settings import DEFAULT_API_BASE_URL as SLACK_API
from adapters.slack.settings import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, SlackSettings
from adapters.telegram.settings import PUBLIC_API as TELEGRAM_API
from adapters.telegram.settings import PUBLIC_FILES as TELEGRAM_FILES
from adapters.telegram.settings import TelegramSettings
from bridge.model import BusyPolicy, ConversationSettings, Verbosity
from bridge.options import (
    KEY_PREFIXES,
    AgentOptions,
    BridgeOptions,
    ChatOptions,
    SandboxMode,
    SandboxOptions,
)
from bridge.paths import default_agent_argv
from bridge.rpc.env import SecretInAgentEnv, agent_environment
from bridge.sandbox import default_mode
from bridge.store.base import redact_url

if TYPE_CHECKING:
    from collections.abc import Mapping


log = logging.getLogger(__name__)

DEFAULT_FILE = "pi-bridge.toml"

# Secrets by their TOML location; they may only come from these environment names.
SECRETS: dict[tuple[str, ...], str] = {
    ("telegram", "bot_token"): "TELEGRAM_BOT_TOKEN",
    ("telegram", "webhook_secret"): "TELEGRAM_WEBHOOK_SECRET",
    ("slack", "bot_token"): "SLACK_BOT_TOKEN",
    ("slack", "app_token"): "SLACK_APP_TOKEN",
    ("slack", "signing_secret"): "SLACK_SIGNING_SECRET",
}

# The environment contract (docs/design.md) plus a few operational extras, each
# mapped to its place in the TOML tree; "list" values are comma-separated.
ENV_NAMES: dict[str, tuple[tuple[str, ...], Literal["str", "list"]]] = {
    "PI_BRIDGE_DATA_DIR": (("data_dir",), "str"),
    "PI_BRIDGE_STORE": (("store",), "str"),
    "PI_BRIDGE_AGENT_COMMAND": (("agent", "command"), "str"),
    "PI_BRIDGE_AGENT_ENV": (("agent", "env"), "list"),
    "PI_BRIDGE_SANDBOX": (("sandbox", "mode"), "str"),
    "PI_BRIDGE_ALLOW_EVERYONE": (("allow_everyone",), "str"),
    "PI_BRIDGE_MAX_PER_USER": (("limits", "max_per_user"), "str"),
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
    "PI_BRIDGE_METRICS_PORT": (("metrics", "port"), "str"),
    "PI_BRIDGE_METRICS_HOST": (("metrics", "host"), "str"),
    "PI_BRIDGE_LOG_LEVEL": (("log", "level"), "str"),
    "PI_BRIDGE_LOG_FORMAT": (("log", "format"), "str"),
}


class ConfigError(Exception):
    """The configuration is unusable; `problems` are "setting: what is wrong" lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value


class _Section(BaseModel):
    # Unknown keys are typos far more often than not: refuse them by name.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


class AgentSection(_Section):
    command: str | list[str] | None = None  # a shell-quoted string or an argv list
    env: list[str] = []  # extra environment names passed to the agent
    session_flags: bool = True


class TelegramSection(_Section):
    bot_token: str | None = Field(default=None, repr=False)
    api_base_url: str = TELEGRAM_API
    file_base_url: str = TELEGRAM_FILES
    allowed_users: list[str] | None = None
    approvers: list[str] = []
    group_trigger: Literal["mention", "all"] = "mention"
    poll_timeout: int = Field(default=30, ge=0, le=50)  # Bot API caps long polls at 50 s
    # Groups are paced per chat now; the key stays accepted so old files load.
    paced_for_groups: bool | None = None
    webhook_url: str | None = None  # set: Telegram pushes updates instead of long polling
    webhook_secret: str | None = Field(default=None, repr=False)
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=1, le=65535)

    _urls = field_validator("api_base_url", "file_base_url")(_http_url)


class SlackSection(_Section):
    bot_token: str | None = Field(default=None, repr=False)
    app_token: str | None = Field(default=None, repr=False)
    signing_secret: str | None = Field(default=None, repr=False)
    api_base_url: str = SLACK_API
    allowed_users: list[str] | None = None
    approvers: list[str] = []
    allowed_channels: list[str] | None = None
    http_port: int = Field(default=DEFAULT_HTTP_PORT, ge=1, le=65535)
    http_host: str = DEFAULT_HTTP_HOST  # behind the TLS proxy Slack requires: local by default
    edits_per_minute: int = Field(default=50, ge=1, le=6000)

    _urls = field_validator("api_base_url")(_http_url)


class SandboxSection(_Section):
    """How agents are contained (docs/security.md, "The agent's sandbox")."""

    mode: SandboxMode = Field(default_factory=default_mode)
    network: Literal["on", "off"] = "on"  # the agent needs its model's API
    read_write: list[Path] = []  # extra paths every agent may write (a shared cache)
    read_only: list[Path] = []  # extra paths it may read inside hidden trees or /tmp


class LimitsSection(_Section):
    max_agents: int = Field(default=8, ge=1)
    max_per_user: int = Field(default=4, ge=1)
    idle_timeout: float = Field(default=30 * 60, gt=0)
    max_run_time: float = Field(default=2 * 60 * 60, gt=0)
    dialog_timeout: float = Field(default=30 * 60, gt=0)
    drain_timeout: float = Field(default=30.0, ge=0)
    dedupe_ttl: float = Field(default=24 * 60 * 60, gt=0)
    inbox_size: int = Field(default=64, ge=1)


class DefaultsSection(_Section):
    """What a new conversation starts with (users change it with commands)."""

    busy_policy: BusyPolicy = "steer"
    verbosity: Verbosity = "all"
    model: str | None = None
    thinking: str | None = None


class ChatSection(_Section):
    """Overrides for one conversation key and those under it, e.g. `[chats."tg:12345"]`."""

    workspace: Path | None = None
    agent_command: str | list[str] | None = None
    approvers: list[str] = []
    busy_policy: BusyPolicy | None = None
    verbosity: Verbosity | None = None


class MetricsSection(_Section):
    port: int | None = Field(default=None, ge=1, le=65535)  # None: no endpoint
    host: str = "127.0.0.1"  # metrics reveal activity: local unless asked otherwise


class LogSection(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    format: Literal["json", "console"] = "console"

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


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


class Config(BaseSettings):
    """The whole configuration tree (the TOML file's shape)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    data_dir: Path = Path("data")
    store: str = "sqlite"
    # A platform with no allowlist lets everyone who finds the bot run shell commands
    # through its agent: refused unless said on purpose.
    allow_everyone: bool = False
    agent: AgentSection = AgentSection()
    sandbox: SandboxSection = SandboxSection()
    telegram: TelegramSection | None = None
    slack: SlackSection | None = None
    limits: LimitsSection = LimitsSection()
    defaults: DefaultsSection = DefaultsSection()
    chats: dict[str, ChatSection] = {}
    metrics: MetricsSection = MetricsSection()
    log: LogSection = LogSection()

    @field_validator("store")
    @classmethod
    def _store(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        scheme = scheme.lower()
        if value.lower() == "sqlite" or (sep and scheme in ("redis", "rediss") and rest):
            return value
        if sep and scheme == "sqlite" and Path(rest).is_absolute():
            return value
        raise ValueError(
            f"unknown store {redact_url(value)!r}: expected 'sqlite', "
            "'sqlite:///absolute/path.db', or a redis:// or rediss:// URL"
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only what `load_config` merged: the contract's names are flat (TELEGRAM_APPROVERS,
        # not TELEGRAM__APPROVERS), and pydantic-settings' own env source would also
        # accept names outside the contract.
        return (init_settings,)


@dataclass(frozen=True)
class Loaded:
    """The validated configuration, in the shapes the bridge and the adapters take."""

    config: Config
    source: Path | None  # the TOML file read, if any
    options: BridgeOptions
    telegram: TelegramSettings | None
    slack: SlackSettings | None

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(name for name, s in (("telegram", self.telegram), ("slack", self.slack)) if s)


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
    return f"{_dotted(loc)}{where}: {msg}"


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
        )
    try:
        agent_env = agent_environment(env, config.agent.env)
    except SecretInAgentEnv as exc:
        problems.append(f"{name('agent', 'env')}: {exc}")
        agent_env = {}

    telegram = _telegram(config.telegram, problems)
    slack = _slack(config.slack, problems)
    problems += _open_to_everyone(config)
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
        dialog_timeout=limits.dialog_timeout,
        drain_timeout=limits.drain_timeout,
        dedupe_ttl=limits.dedupe_ttl,
        inbox_size=limits.inbox_size,
        settings=ConversationSettings(**config.defaults.model_dump()),
        chats=chats,
    )
    return Loaded(config, path, options, telegram, slack)


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
        network=section.network == "on",
        read_write=tuple((cwd / p).resolve() for p in section.read_write),
        read_only=tuple((cwd / p).resolve() for p in section.read_only),
        hidden=tuple(p for p in hidden if not p.is_relative_to(data_dir)),
    )


def open_platforms(config: Config) -> list[str]:
    """The platforms configured with no allowlist at all: open to everyone."""
    sections = (("telegram", config.telegram), ("slack", config.slack))
    return [name for name, s in sections if s is not None and s.allowed_users is None]


def _open_to_everyone(config: Config) -> list[str]:
    if config.allow_everyone:
        return []
    return [
        f"{name.upper()}_ALLOWED_USERS / {name}.allowed_users: not set, so anyone who finds "
        "the bot could make its agent run shell commands. List the user ids that may use it (an "
        "empty list lets nobody in, and the bot tells each person refused their id), or "
        "set PI_BRIDGE_ALLOW_EVERYONE=true to let everyone in on purpose"
        for name in open_platforms(config)
    ]


def _telegram(section: TelegramSection | None, problems: list[str]) -> TelegramSettings | None:
    if section is None:
        return None
    if not section.bot_token:
        # A [telegram] table (or a TELEGRAM_* setting) without its token is a half-done setup.
        problems.append("TELEGRAM_BOT_TOKEN (environment): not set, but Telegram is configured")
        return None
    if section.webhook_url and not section.webhook_secret:
        # Without the secret anyone who finds the URL could post updates as any user.
        problems.append(
            "TELEGRAM_WEBHOOK_SECRET (environment): not set, but telegram.webhook_url is"
        )
        return None
    if section.paced_for_groups is not None:
        log.warning("telegram.paced_for_groups is no longer used: groups are paced per chat")
    return TelegramSettings(
        token=section.bot_token,
        base_url=section.api_base_url,
        base_file_url=section.file_base_url,
        allowed_users=_allowlist(section.allowed_users),
        approvers=frozenset(section.approvers),
        group_trigger=section.group_trigger,
        poll_timeout=section.poll_timeout,
        webhook_url=section.webhook_url,
        webhook_secret=section.webhook_secret,
        webhook_listen=section.webhook_listen,
        webhook_port=section.webhook_port,
    )


def _slack(section: SlackSection | None, problems: list[str]) -> SlackSettings | None:
    if section is None:
        return None
    if not section.bot_token:
        problems.append("SLACK_BOT_TOKEN (environment): not set, but Slack is configured")
        return None
    if not section.app_token and not section.signing_secret:
        problems.append(
            "SLACK_APP_TOKEN / SLACK_SIGNING_SECRET (environment): set one: "
            "the app token for Socket Mode, or the signing secret for HTTP mode"
        )
        return None
    return SlackSettings(
        bot_token=section.bot_token,
        app_token=section.app_token or "",
        signing_secret=section.signing_secret or "",
        api_base_url=section.api_base_url,
        allowed_users=_allowlist(section.allowed_users),
        approvers=frozenset(section.approvers),
        allowed_channels=frozenset(section.allowed_channels) if section.allowed_channels else None,
        http_port=section.http_port,
        http_host=section.http_host,
        edits_per_minute=section.edits_per_minute,
    )


def _allowlist(ids: list[str] | None) -> frozenset[str] | None:
    """None (no list: everyone, allowed only with allow_everyone) stays None; an empty
    list is an empty set, which lets nobody in."""
    return None if ids is None else frozenset(ids)

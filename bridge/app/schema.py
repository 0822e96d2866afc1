"""The configuration's shape: the TOML file's tables as pydantic models.

`Config` is the whole tree; each `*Section` is one table. Unknown keys are refused by
name (typos far more often than not). A platform's section is its adapter's settings
as written in the file: its fields are `TelegramSettings` / `SlackSettings` fields
(under their TOML key as alias where the two names differ) plus the few that only
the file knows, and `bridge.app.platforms` builds the settings from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from adapters.discord.settings import PUBLIC_API as DISCORD_API
from adapters.slack.settings import DEFAULT_API_BASE_URL as SLACK_API
from adapters.slack.settings import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, SlackStreaming
from adapters.telegram.settings import PUBLIC_API as TELEGRAM_API
from adapters.telegram.settings import PUBLIC_FILES as TELEGRAM_FILES
from adapters.telegram.settings import GroupTrigger, Streaming
from bridge.containment.sandbox import default_mode
from bridge.model import BusyPolicy, Verbosity
from bridge.options import ApprovalMode, SandboxMode
from bridge.store.base import redact_url


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


class AgentsSection(_Section):
    """`[agents]`: what becomes of running agents when the bridge stops or dies."""

    on_stop: Literal["detach", "stop"] = "detach"  # detach: they run on, taken back at start
    detach_timeout: float = Field(default=10 * 60, gt=0)  # alone this long: the agent ends


class TelegramSection(_Section):
    """`[telegram]`: the fields of `TelegramSettings` (lists become sets), plus
    `TELEGRAM_ONLY`."""

    token: str = Field(default="", alias="bot_token", repr=False)
    base_url: str = Field(default=TELEGRAM_API, alias="api_base_url")
    base_file_url: str = Field(default=TELEGRAM_FILES, alias="file_base_url")
    allowed_users: list[str] | None = None
    approvers: list[str] = []
    group_trigger: GroupTrigger = "mention"
    poll_timeout: int = Field(default=30, ge=0, le=50)  # Bot API caps long polls at 50 s
    # Groups are paced per chat now; the key stays accepted so old files load.
    paced_for_groups: bool | None = None
    webhook_url: str | None = None  # set: Telegram pushes updates instead of long polling
    webhook_secret: str | None = Field(default=None, repr=False)
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=1, le=65535)
    streaming: Streaming = "draft"  # "edit": never drafts, post and edit as in groups

    _urls = field_validator("base_url", "base_file_url")(_http_url)


# Keys of [telegram] that are not TelegramSettings fields.
TELEGRAM_ONLY = frozenset({"paced_for_groups"})


class SlackSection(_Section):
    """`[slack]`: the fields of `SlackSettings` (lists become sets)."""

    bot_token: str = Field(default="", repr=False)
    app_token: str = Field(default="", repr=False)
    signing_secret: str = Field(default="", repr=False)
    api_base_url: str = SLACK_API
    allowed_users: list[str] | None = None
    approvers: list[str] = []
    allowed_channels: list[str] | None = None
    http_port: int = Field(default=DEFAULT_HTTP_PORT, ge=1, le=65535)
    http_host: str = DEFAULT_HTTP_HOST  # behind the TLS proxy Slack requires: local by default
    edits_per_minute: int = Field(default=50, ge=1, le=6000)
    # "edit": answers are posted and edited (chat.update) even where they could stream.
    streaming: SlackStreaming = "stream"

    _urls = field_validator("api_base_url")(_http_url)

    @field_validator("allowed_channels")
    @classmethod
    def _no_channels_is_every_channel(cls, value: list[str] | None) -> list[str] | None:
        # Unlike an empty user list (nobody), an empty channel list limits nothing.
        return value or None


class DiscordSection(_Section):
    """`[discord]`: the fields of `DiscordSettings` (lists become sets)."""

    token: str = Field(default="", alias="bot_token", repr=False)
    allowed_users: list[str] | None = None
    allowed_roles: list[str] = []  # their members are allowed too
    approvers: list[str] = []  # user or role ids
    allowed_channels: list[str] | None = None
    api_url: str = DISCORD_API
    message_content: bool = True  # the privileged intent (docs/commands.md, "Discord")

    _urls = field_validator("api_url")(_http_url)

    @field_validator("allowed_channels")
    @classmethod
    def _no_channels_is_every_channel(cls, value: list[str] | None) -> list[str] | None:
        return value or None

    @model_validator(mode="after")
    def _roles_alone_are_an_allowlist(self) -> DiscordSection:
        # Roles named and no user: only those roles' members, not everyone.
        if self.allowed_roles and self.allowed_users is None:
            return self.model_copy(update={"allowed_users": []})
        return self


class SandboxSection(_Section):
    """How agents are contained (docs/security.md, "The agent's sandbox")."""

    mode: SandboxMode = Field(default_factory=default_mode)
    # "on" is the old spelling of "host" (before the agent had a network of its own).
    network: Literal["isolated", "host", "off", "on"] = "isolated"
    host_ports: list[Annotated[int, Field(ge=1, le=65535)]] = []  # e.g. a local model server
    user: str = ""  # who a root bridge's agents run as ("" = nobody); not root
    read_write: list[Path] = []  # extra paths every agent may write (a shared cache)
    read_only: list[Path] = []  # extra paths it may read inside hidden trees or /tmp


class WorkerSection(_Section):
    """A worker's part in a scale-out (`--role worker`, bridge/scale/)."""

    name: str = ""  # how its leases name it; "": the host's name (distinct per worker)
    max_agents: int = Field(default=100, ge=1)  # conversations it owns at once
    lease_ttl: float = Field(default=15.0, ge=1)  # a dead worker's conversations move after it


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
    # Every conversation under the key works in this project, each in a worktree of its
    # own (so not together with `workspace`).
    project: str | None = None
    timezone: str | None = None  # its schedules' zone ("Europe/Berlin"); None: UTC; /tz changes it
    notify: NotifySection | None = None  # keys not given: as in the bridge's [notify]
    # Every message first gets a read-only plan to approve (docs/commands.md "Plan first").
    plan_first: bool = False


class NotifySection(_Section):
    """`[notify]`: which events ping the person who started a run (docs/commands.md,
    "Notifications"); everything else is posted without a notification."""

    questions: bool = True  # a question (approval, dialog) waiting for them
    done: bool = True  # the end of the run (done, failed, stopped)
    quiet_under: float = Field(default=30.0, ge=0)  # a shorter run ends without a ping


class ProjectSection(_Section):
    """`[projects.<name>]`: a git repository conversations work in, each in a worktree
    and on a branch of its own (bridge/projects/project.py). Whether `path` is a repository is
    asked by `pi-bridge check`, not here: loading the file does no I/O."""

    path: Path  # the repository's top directory; relative: to where the bridge starts
    base: str | None = None  # new branches fork from it; None: the repository's HEAD branch
    chats: list[str] = []  # key prefixes that may pick it with /project; []: every chat
    done_on_new: bool = False  # /new also tidies the worktree up, as /project done does
    # /pr (bridge/projects/pull_requests.py): where the branch is pushed and the request opened.
    remote: str = "origin"  # a remote of the repository, by name, or a URL
    remote_token_env: str = ""  # the variable of the bridge's environment holding the token
    remote_user: str = "x-access-token"  # the user name sent with the token over HTTPS
    forge: Literal["github", "none"] | None = None  # None: from the remote's host
    forge_api_url: str = ""  # "": https://api.github.com (GitHub Enterprise: its /api/v3)
    forge_repository: str = ""  # "owner/name"; "": read from the remote's URL


class FilesSection(_Section):
    max_bytes: int = Field(default=50 * 2**20, ge=1)  # per file a person sends


class TranscribeSection(_Section):
    url: str = ""  # an OpenAI-compatible /v1/audio/transcriptions endpoint; "": off
    model: str = "whisper-1"
    key_env: str = ""  # the name of the variable holding its key (the key never here)


class ApprovalsSection(_Section):
    """The approval gate: which tool calls wait for a person's answer in the chat."""

    mode: ApprovalMode = "dangerous"
    patterns: list[str] | None = None  # regexes of dangerous bash commands; None: shipped
    notify_approvers: Literal["off", "dm"] = "off"  # "dm": approvers get a copy


class SchedulesSection(_Section):
    """Scheduled work (/every, /at; bridge/schedules/)."""

    catch_up: float = Field(default=60 * 60, ge=0)  # a run missed while down runs if this late
    max_per_user: int = Field(default=20, ge=1)  # one person's schedules, all chats together
    tick: float = Field(default=15.0, gt=0, le=60)  # seconds between looks: a run is this late


class MetricsSection(_Section):
    port: int | None = Field(default=None, ge=1, le=65535)  # None: no endpoint
    host: str = "127.0.0.1"  # metrics reveal activity: local unless asked otherwise


class BudgetLimitsSection(_Section):
    """One budget: dollars a day, a month and a run (unset: no limit)."""

    daily: float | None = Field(default=None, ge=0)
    monthly: float | None = Field(default=None, ge=0)
    per_run: float | None = Field(default=None, ge=0)


class BudgetsSection(_Section):
    """`[budgets]`: limits on what the agents' models cost, per person and per chat
    (`person` and `chat` for everyone, `people."<user id>"` and `chats."<chat>"` for
    one), the time zone days and months are counted in, and how much an approver's
    [Raise today's limit] adds (a fraction of the limit reached)."""

    time_zone: str = "UTC"
    raise_step: float = Field(default=0.5, gt=0)
    person: BudgetLimitsSection = BudgetLimitsSection()
    chat: BudgetLimitsSection = BudgetLimitsSection()
    people: dict[str, BudgetLimitsSection] = {}
    chats: dict[str, BudgetLimitsSection] = {}

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (an IANA name, e.g. Europe/Berlin)"
            ) from None
        return value


class LogSection(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    format: Literal["json", "console"] = "console"

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


class Config(BaseSettings):
    """The whole configuration tree (the TOML file's shape)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    data_dir: Path = Path("data")
    store: str = "sqlite"
    # all: one process does everything; frontend / worker: a scale-out on Redis.
    role: Literal["all", "frontend", "worker"] = "all"
    worker: WorkerSection = WorkerSection()
    # A platform with no allowlist lets everyone who finds the bot run shell commands
    # through its agent: refused unless said on purpose.
    allow_everyone: bool = False
    agent: AgentSection = AgentSection()
    agents: AgentsSection = AgentsSection()
    sandbox: SandboxSection = SandboxSection()
    telegram: TelegramSection | None = None
    slack: SlackSection | None = None
    discord: DiscordSection | None = None
    limits: LimitsSection = LimitsSection()
    defaults: DefaultsSection = DefaultsSection()
    chats: dict[str, ChatSection] = {}
    projects: dict[str, ProjectSection] = {}  # no environment names: a table per project
    files: FilesSection = FilesSection()
    transcribe: TranscribeSection = TranscribeSection()
    approvals: ApprovalsSection = ApprovalsSection()
    schedules: SchedulesSection = SchedulesSection()
    metrics: MetricsSection = MetricsSection()
    log: LogSection = LogSection()
    notify: NotifySection = NotifySection()
    budgets: BudgetsSection = BudgetsSection()

    @model_validator(mode="after")
    def _role_needs_redis(self) -> Config:
        if self.role != "all" and not self.store.lower().startswith(("redis://", "rediss://")):
            raise ValueError(
                f"role {self.role!r} needs the Redis store that frontends and workers share: "
                "set PI_BRIDGE_STORE=redis://… (or run with --role all)"
            )
        return self

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

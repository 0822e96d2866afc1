"""The knobs of the platform-neutral bridge, already validated.

`bridge.app.config` (issue: configuration) builds these from the TOML file and the
environment; tests and the console build them directly. Every duration is in
seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from bridge.model import BusyPolicy, ConversationSettings, NotifySettings, Verbosity
from bridge.spend.limits import Budgets
from bridge.store.records import ConversationRecord

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

SandboxMode = Literal["bwrap", "off"]
# "isolated": its own network namespace, outbound through pasta, no host loopback port
# but `host_ports`; "host": the host's network as it is; "off": none at all.
NetworkMode = Literal["isolated", "host", "off"]
ApprovalMode = Literal["off", "dangerous", "writes", "all"]
StopMode = Literal["detach", "stop"]


@dataclass(frozen=True)
class SandboxOptions:
    """How agents are contained (docs/security.md, "The agent's sandbox").

    `mode` "bwrap" runs each agent in bubblewrap: its own PID namespace, the system
    read-only, only its conversation's workspace, session dir and private home
    writable, the data dir otherwise hidden. "off" runs it as a plain child (the
    bridge is still non-dumpable and a root agent still loses its capabilities).
    """

    mode: SandboxMode = "bwrap"
    network: NetworkMode = "isolated"  # the agent needs its model's API, nothing of the host
    host_ports: tuple[int, ...] = ()  # the host loopback's TCP ports it may reach (a local model)
    # Who a root bridge's agents run as: a user name or "uid[:gid]"; "" is "nobody".
    user: str = ""
    read_write: tuple[Path, ...] = ()  # extra paths the agent may write
    read_only: tuple[Path, ...] = ()  # extra paths the agent may read (beyond the system)
    hidden: tuple[Path, ...] = ()  # never mounted: the config file, a store outside the data dir


@dataclass(frozen=True)
class AgentOptions:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the agent's whole environment (built from an allowlist)
    # `--session-dir`/`--session` flags; off for the legacy 0.13, which has no
    # `--session-dir` (it would read the bare directory as a first message): it gets
    # `--session <file> --continue` with a file the bridge names (lifetime.py).
    session_flags: bool = True
    sandbox: SandboxOptions = field(default_factory=lambda: SandboxOptions(mode="off"))


@dataclass(frozen=True)
class ChatOptions:
    """Overrides for the conversations under one key (`[chats."<key>"]`).

    A key covers itself and the keys under it: "slack:T1:C2" a channel's threads,
    "tg:-100123" a group's forum topics. `busy_policy` and `verbosity` are where a
    new conversation starts; its users may change them with commands.
    """

    workspace: Path | None = None
    argv: tuple[str, ...] | None = None
    approvers: frozenset[str] = frozenset()
    busy_policy: BusyPolicy | None = None
    verbosity: Verbosity | None = None
    project: str | None = None  # conversations under the key work in this project
    timezone: str | None = None  # the zone schedules' times are in, unless /tz says another
    notify: NotifySettings | None = None  # `[chats."<key>".notify]`; None: the bridge's
    plan_first: bool = False  # a message is planned read-only first (bridge/conversation/plans.py)


@dataclass(frozen=True)
class ProjectOptions:
    """A git repository conversations work in, each in its own worktree and branch
    (`[projects.<name>]`, bridge/projects/project.py).

    `base` is the branch new worktrees fork from (None: the repository's HEAD
    branch); `chats` the key prefixes that may pick it with /project (empty: every
    chat); with `done_on_new`, /new also tidies the worktree up as /project done does.
    The `remote*` and `forge*` fields are /pr's (bridge/projects/pull_requests.py).
    """

    path: Path
    base: str | None = None
    chats: tuple[str, ...] = ()
    done_on_new: bool = False
    remote: str = "origin"
    remote_token_env: str = ""  # its value is read at push time, never stored here
    remote_user: str = "x-access-token"
    forge: str | None = None  # "github", "none"; None: from the remote's host
    forge_api_url: str = ""
    forge_repository: str = ""


@dataclass(frozen=True)
class ApprovalOptions:
    """The bridge's approval gate (bridge/approvals, docs/commands.md "Approvals").

    `mode` "off" asks nobody (the gate is still loaded: it keeps a plan read-only,
    /plan); "dangerous" asks before bash commands matching `patterns` (None: the
    shipped list) or writing outside the workspace; "writes"
    also before every edit and write; "all" before every tool call. With
    `notify_approvers` "dm", each approver also gets the question in a direct message.
    """

    mode: ApprovalMode = "off"
    patterns: tuple[str, ...] | None = None
    notify_approvers: Literal["off", "dm"] = "off"


@dataclass(frozen=True)
class Transcription:
    """An OpenAI-compatible transcription endpoint (`/v1/audio/transcriptions`): its
    URL, model, and key (read from the variable the operator names; never in the
    agent's environment, which is an allowlist)."""

    url: str
    model: str = "whisper-1"
    key: str = field(default="", repr=False)


@dataclass(frozen=True)
class ScheduleOptions:
    """Scheduled work (`[schedules]`, bridge/schedules/): a run the bridge was down for
    still runs at its start when at most `catch_up` seconds late (else it is reported
    missed); one person may have `max_per_user` schedules over all conversations."""

    catch_up: float = 60 * 60
    max_per_user: int = 20
    tick: float = 15.0  # seconds between looks at the schedules (a run is that late at most)


@dataclass(frozen=True)
class BridgeOptions:
    data_dir: Path
    agent: AgentOptions
    allowed_users: frozenset[str] | None = None  # None: anyone who can reach the bot
    approvers: frozenset[str] = frozenset()  # may answer any conversation's dialogs
    max_agents: int = 8
    max_per_user: int = 4  # live agents one person's conversations may hold at once
    idle_timeout: float = 30 * 60  # an idle agent is stopped (its session resumes later)
    max_run_time: float = 2 * 60 * 60  # a run is aborted after this, then killed
    dialog_timeout: float = 30 * 60  # for dialogs that carry no timeout of their own
    drain_timeout: float = 30.0  # on shutdown, runs may finish for this long
    dedupe_ttl: float = 24 * 60 * 60  # platforms redeliver within minutes; a day is ample
    inbox_size: int = 64  # queued messages per conversation before "slow down"
    file_max_bytes: int = 50 * 2**20  # a file a person sends, saved in the workspace
    transcribe: Transcription | None = None  # voice notes become text (None: kept as files)
    approvals: ApprovalOptions = field(default_factory=ApprovalOptions)
    # "detach": agents run under hosts and outlive a bridge stop or crash, to be taken
    # back at the next start (bridge/reattach.py); a host left alone `detach_timeout`
    # seconds ends its agent. "stop": agents are the bridge's children and end with it.
    on_stop: StopMode = "stop"
    detach_timeout: float = 10 * 60
    settings: ConversationSettings = field(default_factory=ConversationSettings)
    notify: NotifySettings = field(default_factory=NotifySettings)  # `[notify]`
    chats: Mapping[str, ChatOptions] = field(default_factory=dict)
    projects: Mapping[str, ProjectOptions] = field(default_factory=dict)
    schedules: ScheduleOptions = field(default_factory=ScheduleOptions)
    # The conversation keys this bridge serves start with this ("": any). Bridges of
    # several platforms share one store; each takes back only its own runs on start.
    key_prefix: str = ""
    # Limits on what the agents' models cost (bridge/spend/); none by default.
    budgets: Budgets = field(default_factory=Budgets)

    def chat(self, key: str) -> ChatOptions | None:
        """The overrides for `key`: its own, else those of the nearest key above it."""
        while True:
            found = self.chats.get(key)
            if found is not None:
                return found
            key, sep, _ = key.rpartition(":")
            if not sep:
                return None

    def workspace(self, key: str) -> Path:
        chat = self.chat(key)
        if chat is not None and chat.workspace is not None:
            return chat.workspace
        return self.data_dir / "workspaces" / safe_name(key)

    def bound_project(self, key: str) -> str | None:
        """The project conversations under `key` work in unless one picks another."""
        chat = self.chat(key)
        return chat.project if chat is not None else None

    def projects_for(self, key: str) -> list[str]:
        """The projects a conversation under `key` may pick with /project."""
        bound = self.bound_project(key)
        return [
            name
            for name, project in self.projects.items()
            if name == bound or not project.chats or any(covers(p, key) for p in project.chats)
        ]

    def argv(self, key: str) -> tuple[str, ...]:
        chat = self.chat(key)
        return chat.argv if chat is not None and chat.argv else self.agent.argv

    def approvers_of(self, key: str) -> frozenset[str]:
        chat = self.chat(key)
        return self.approvers | chat.approvers if chat is not None else self.approvers

    def all_approvers(self) -> frozenset[str]:
        """Everyone who approves somewhere: the bridge's approvers and every chat's."""
        return self.approvers.union(*(chat.approvers for chat in self.chats.values()))

    def settings_of(self, key: str) -> ConversationSettings:
        """What a new conversation under `key` starts with."""
        chat = self.chat(key)
        if chat is None:
            return self.settings
        changes = {
            name: value
            for name, value in (("busy_policy", chat.busy_policy), ("verbosity", chat.verbosity))
            if value is not None
        }
        return self.settings.model_copy(update=changes)

    def timezone_of(self, key: str, settings: ConversationSettings | None = None) -> str:
        """The zone of the conversation `key`'s schedules: its /tz, else its chat's, else UTC."""
        if settings is not None and settings.timezone:
            return settings.timezone
        chat = self.chat(key)
        return chat.timezone if chat is not None and chat.timezone else "UTC"

    def notify_of(self, key: str) -> NotifySettings:
        """Which events ping the person who started a run, for conversations under `key`."""
        chat = self.chat(key)
        return chat.notify if chat is not None and chat.notify is not None else self.notify

    def session_dir(self, key: str) -> Path:
        return self.data_dir / "sessions" / safe_name(key)

    def new_record(self, key: str, owner: str, now: float) -> ConversationRecord:
        """The record of a conversation `owner` begins under `key` at `now`."""
        return ConversationRecord(
            key=key,
            workspace=str(self.workspace(key)),
            session_dir=str(self.session_dir(key)),
            owner=owner,
            settings=self.settings_of(key),
            created_at=now,
            last_active=now,
        )


def covers(prefix: str, key: str) -> bool:
    """Whether key `prefix` is `key` or a key above it ("slack:T1:C2" covers its threads)."""
    return key == prefix or key.startswith(prefix + ":")


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(key: str) -> str:
    """A conversation key as one path component ("slack:T1:C2:17.5" → "slack_T1_C2_17.5")."""
    name = _UNSAFE.sub("_", key).strip("._") or "conversation"
    return name[:200]

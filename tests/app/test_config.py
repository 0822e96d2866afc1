"""Configuration: TOML file plus environment, every mistake named, secrets env-only.

Table-driven: each case is a TOML text and an environment; broken ones list the
setting names the error must mention. `load_config` gets the environment and
the working directory explicitly, so nothing here reads the real ones.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from adapters.slack.settings import SlackSettings
from adapters.telegram.convert import Me, convert
from adapters.telegram.settings import TelegramSettings
from bridge.admission import screen
from bridge.app.config import ConfigError, load_config
from bridge.app.schema import TELEGRAM_ONLY, SlackSection, TelegramSection
from bridge.logs import Redactor, RedactSecrets, secret_values, setup_logging
from bridge.model import NotifySettings
from bridge.options import ApprovalOptions, safe_name
from bridge.paths import SEND_FILE_EXTENSION
from tests.support.paths import REPO

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from pydantic import BaseModel

    from bridge.app.config import Loaded

EXAMPLE = REPO / "deploy" / "pi-bridge.example.toml"
BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}


def load(tmp_path: Path, toml: str | None, env: dict[str, str] | None = None) -> Loaded:
    full = {**BASE_ENV, **(env or {})}
    if toml is not None:
        (tmp_path / "pi-bridge.toml").write_text(toml, encoding="utf-8")
    return load_config(full, cwd=tmp_path)


def problems(tmp_path: Path, toml: str | None, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, toml, env)
    return "\n".join(caught.value.problems)


def test_no_file_and_no_tokens_is_the_console_on_sqlite_in_data(tmp_path: Path) -> None:
    loaded = load(tmp_path, None)
    assert loaded.source is None
    assert loaded.platforms == ()
    assert loaded.config.store == "sqlite"
    assert loaded.options.data_dir == (tmp_path / "data").resolve()
    # The bridge's own extension (send_file) is loaded by the default command.
    assert loaded.options.agent.argv[1:] == ("--mode", "rpc", "-e", str(SEND_FILE_EXTENSION))
    assert SEND_FILE_EXTENSION.is_file()
    assert loaded.config.metrics.port is None


def test_the_annotated_example_is_valid(tmp_path: Path) -> None:
    loaded = load_config({**BASE_ENV, "PI_BRIDGE_CONFIG": str(EXAMPLE)}, cwd=tmp_path)
    assert loaded.source == EXAMPLE
    assert loaded.options.max_agents == 8
    assert loaded.config.metrics.host == "127.0.0.1"


GOOD: list[tuple[str, str, dict[str, str]]] = [
    (
        "limits and defaults",
        '[limits]\nmax_agents = 3\ndrain_timeout = 5\n[defaults]\nbusy_policy = "ask"\n',
        {},
    ),
    ("agent command as a list", '[agent]\ncommand = ["my pi", "--mode", "rpc"]\n', {}),
    ("agent command from env", "", {"PI_BRIDGE_AGENT_COMMAND": "'my pi' --mode rpc -x"}),
    (
        "telegram from env only",
        "",
        {"TELEGRAM_BOT_TOKEN": "123:abc", "TELEGRAM_ALLOWED_USERS": "42"},
    ),
    (
        "telegram table plus token",
        '[telegram]\nallowed_users = [42, "43"]\ngroup_trigger = "all"\n',
        {"TELEGRAM_BOT_TOKEN": "123:abc"},
    ),
    (
        "slack socket mode",
        "",
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "SLACK_ALLOWED_USERS": "U1"},
    ),
    (
        "slack http mode, open to everyone on purpose",
        "allow_everyone = true\n",
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s3cret"},
    ),
    ("redis store", 'store = "redis://localhost:6379/0"\n', {}),
    ("redis password from env", "", {"PI_BRIDGE_STORE": "redis://:pw@localhost:6379/0"}),
    ("sqlite file store", 'store = "sqlite:///var/lib/pi/bridge.db"\n', {}),
    ("metrics port from env", "", {"PI_BRIDGE_METRICS_PORT": "9464"}),
    ("empty env values are unset", "", {"TELEGRAM_BOT_TOKEN": "", "PI_BRIDGE_STORE": ""}),
    (
        "chat overrides",
        '[chats."tg:1"]\nworkspace = "/srv/w"\nverbosity = "off"\n',
        {},
    ),
    (
        "telegram webhook",
        '[telegram]\nwebhook_url = "https://bot.example/tg"\nwebhook_port = 8080\n',
        {
            "TELEGRAM_BOT_TOKEN": "1:abc",
            "TELEGRAM_WEBHOOK_SECRET": "s3cret",
            "PI_BRIDGE_ALLOW_EVERYONE": "true",
        },
    ),
    (
        "old paced_for_groups",
        "[telegram]\npaced_for_groups = true\nallowed_users = []\n",
        {"TELEGRAM_BOT_TOKEN": "1:a"},
    ),
]


@pytest.mark.parametrize(("toml", "env"), [(t, e) for _, t, e in GOOD], ids=[n for n, *_ in GOOD])
def test_good_configs_load(tmp_path: Path, toml: str, env: dict[str, str]) -> None:
    load(tmp_path, toml, env)


BROKEN: list[tuple[str, str, dict[str, str], list[str]]] = [
    ("unknown key", "max_agent = 3\n", {}, ["max_agent", "unknown setting"]),
    ("unknown table key", "[limits]\nmax_agent = 3\n", {}, ["limits.max_agent"]),
    ("zero agents", "[limits]\nmax_agents = 0\n", {}, ["limits.max_agents"]),
    ("negative idle", "[limits]\nidle_timeout = -1\n", {}, ["limits.idle_timeout"]),
    ("busy policy", '[defaults]\nbusy_policy = "never"\n', {}, ["defaults.busy_policy"]),
    ("bad store", 'store = "mysql://db"\n', {}, ["store", "unknown store"]),
    ("relative sqlite", 'store = "sqlite://rel.db"\n', {}, ["store"]),
    ("bad store from env", "", {"PI_BRIDGE_STORE": "postgres://x"}, ["PI_BRIDGE_STORE"]),
    ("metrics port", "[metrics]\nport = 70000\n", {}, ["metrics.port"]),
    ("metrics port env", "", {"PI_BRIDGE_METRICS_PORT": "nine"}, ["PI_BRIDGE_METRICS_PORT"]),
    ("log format", '[log]\nformat = "xml"\n', {}, ["log.format"]),
    ("log level env", "", {"PI_BRIDGE_LOG_LEVEL": "loud"}, ["PI_BRIDGE_LOG_LEVEL"]),
    (
        "telegram url",
        "",
        {"TELEGRAM_BOT_TOKEN": "1:a", "TELEGRAM_API_BASE_URL": "ftp://x"},
        ["TELEGRAM_API_BASE_URL"],
    ),
    ("telegram without token", '[telegram]\ngroup_trigger = "all"\n', {}, ["TELEGRAM_BOT_TOKEN"]),
    ("poll timeout", "[telegram]\npoll_timeout = 99\n", {}, ["telegram.poll_timeout"]),
    ("slack without token", "", {"SLACK_APP_TOKEN": "xapp-1"}, ["SLACK_BOT_TOKEN"]),
    (
        "slack without mode",
        "",
        {"SLACK_BOT_TOKEN": "xoxb-1"},
        ["SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"],
    ),
    (
        "unbalanced agent command",
        "",
        {"PI_BRIDGE_AGENT_COMMAND": "pi 'rpc"},
        ["PI_BRIDGE_AGENT_COMMAND"],
    ),
    ("empty agent command list", "[agent]\ncommand = []\n", {}, ["agent.command", "empty"]),
    (
        "secret passed to the agent",
        "",
        {"PI_BRIDGE_AGENT_ENV": "OPENAI_API_KEY,TELEGRAM_BOT_TOKEN"},
        ["PI_BRIDGE_AGENT_ENV", "TELEGRAM_BOT_TOKEN"],
    ),
    (
        "chat verbosity",
        '[chats."tg:1"]\nverbosity = "loud"\n',
        {},
        ['chats."tg:1".verbosity'],
    ),
    (
        "not a conversation key",
        '[chats."telegram:1"]\nverbosity = "off"\n',
        {},
        ['chats."telegram:1"', "not a conversation key", "tg:"],
    ),
    (
        "chat agent command",
        '[chats."tg:1"]\nagent_command = "pi \'rpc"\n',
        {},
        ['chats."tg:1".agent_command', "shell command"],
    ),
    (
        "webhook secret in the file",
        '[telegram]\nwebhook_secret = "x"\n',
        {"TELEGRAM_BOT_TOKEN": "1:abc"},
        ["telegram.webhook_secret", "TELEGRAM_WEBHOOK_SECRET"],
    ),
    ("per-user cap of zero", "[limits]\nmax_per_user = 0\n", {}, ["limits.max_per_user"]),
    (
        "per-user cap not a number",
        "",
        {"PI_BRIDGE_MAX_PER_USER": "four"},
        ["PI_BRIDGE_MAX_PER_USER"],
    ),
    ("everyone, maybe", "", {"PI_BRIDGE_ALLOW_EVERYONE": "maybe"}, ["PI_BRIDGE_ALLOW_EVERYONE"]),
    ("not toml", "store = \n", {}, ["not valid TOML"]),
    ("missing file", "", {"PI_BRIDGE_CONFIG": "/nonexistent/pi.toml"}, ["PI_BRIDGE_CONFIG"]),
]


@pytest.mark.parametrize(
    ("toml", "env", "named"),
    [(t, e, n) for _, t, e, n in BROKEN],
    ids=[c[0] for c in BROKEN],
)
def test_each_mistake_is_named(
    tmp_path: Path, toml: str, env: dict[str, str], named: list[str]
) -> None:
    text = problems(tmp_path, toml, env)
    for name in named:
        assert name in text
    assert "Traceback" not in text


def test_all_mistakes_are_reported_at_once(tmp_path: Path) -> None:
    text = problems(
        tmp_path,
        "[limits]\nmax_agents = 0\ninbox_size = 0\n[log]\nformat = 'xml'\n",
        {"PI_BRIDGE_METRICS_PORT": "x"},
    )
    for name in ("limits.max_agents", "limits.inbox_size", "log.format", "PI_BRIDGE_METRICS_PORT"):
        assert name in text


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    toml = (
        'data_dir = "from-file"\nstore = "redis://localhost"\n'
        '[metrics]\nport = 1000\n[agent]\ncommand = "file-pi --mode rpc"\n'
        '[telegram]\napi_base_url = "http://file.example/bot"\ngroup_trigger = "all"\n'
    )
    loaded = load(
        tmp_path,
        toml,
        {
            "PI_BRIDGE_DATA_DIR": "from-env",
            "PI_BRIDGE_STORE": "sqlite",
            "PI_BRIDGE_METRICS_PORT": "2000",
            "PI_BRIDGE_AGENT_COMMAND": "env-pi --mode rpc",
            "TELEGRAM_BOT_TOKEN": "1:abc",
            "TELEGRAM_API_BASE_URL": "http://127.0.0.1:1/bot",
            "TELEGRAM_ALLOWED_USERS": "42",
        },
    )
    assert loaded.options.data_dir == (tmp_path / "from-env").resolve()
    assert loaded.config.store == "sqlite"
    assert loaded.config.metrics.port == 2000
    assert loaded.options.agent.argv == ("env-pi", "--mode", "rpc")
    assert loaded.telegram is not None
    assert loaded.telegram.base_url == "http://127.0.0.1:1/bot"
    assert loaded.telegram.group_trigger == "all"  # the file's sibling setting is kept


@pytest.mark.parametrize(
    ("table", "key", "env_name"),
    [
        ("telegram", "bot_token", "TELEGRAM_BOT_TOKEN"),
        ("slack", "bot_token", "SLACK_BOT_TOKEN"),
        ("slack", "app_token", "SLACK_APP_TOKEN"),
        ("slack", "signing_secret", "SLACK_SIGNING_SECRET"),
    ],
)
def test_secrets_in_the_file_are_refused(
    tmp_path: Path, table: str, key: str, env_name: str
) -> None:
    secret = "do-not-echo-this-value"
    text = problems(
        tmp_path,
        f'[{table}]\n{key} = "{secret}"\n',
        {"TELEGRAM_BOT_TOKEN": "1:a", "SLACK_BOT_TOKEN": "b", "SLACK_APP_TOKEN": "c"},
    )
    assert f"{table}.{key}" in text
    assert env_name in text
    assert secret not in text


def test_a_store_password_in_the_file_is_refused(tmp_path: Path) -> None:
    text = problems(tmp_path, 'store = "redis://:hunter2secret@localhost:6379/0"\n')
    assert "store" in text
    assert "PI_BRIDGE_STORE" in text
    assert "hunter2secret" not in text


def test_store_password_is_not_echoed(tmp_path: Path) -> None:
    text = problems(tmp_path, None, {"PI_BRIDGE_STORE": "mongodb://u:hunter2secret@h/db"})
    assert "PI_BRIDGE_STORE" in text
    assert "hunter2secret" not in text


def test_platform_settings_reach_the_adapters(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        "[slack]\nhttp_port = 3100\nedits_per_minute = 90\n",
        {
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_SIGNING_SECRET": "sig",
            "SLACK_ALLOWED_USERS": "U1, U2, S0DEVS",
            "SLACK_APPROVERS": "U1,S0LEADS",
            "SLACK_ALLOWED_CHANNELS": "C1",
            "TELEGRAM_BOT_TOKEN": "1:abc",
            "TELEGRAM_APPROVERS": "42",
            "PI_BRIDGE_ALLOW_EVERYONE": "true",  # Telegram's list stays unset
        },
    )
    assert loaded.platforms == ("telegram", "slack")
    assert loaded.slack is not None
    assert loaded.slack.allowed_users == frozenset({"U1", "U2", "S0DEVS"})
    assert loaded.slack.user_groups == frozenset({"S0DEVS", "S0LEADS"})
    assert loaded.slack.allowed_channels == frozenset({"C1"})
    assert loaded.slack.http_port == 3100
    assert loaded.slack.edits_per_minute == 90
    assert not loaded.slack.socket_mode
    assert loaded.telegram is not None
    assert loaded.telegram.approvers == frozenset({"42"})
    assert loaded.telegram.allowed_users is None


def test_agent_env_is_allowlisted(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        None,
        {
            "PI_BRIDGE_AGENT_ENV": "OPENAI_API_KEY",
            "OPENAI_API_KEY": "k",
            "TELEGRAM_BOT_TOKEN": "1:a",
            "TELEGRAM_ALLOWED_USERS": "42",
        },
    )
    env = loaded.options.agent.env
    assert env["OPENAI_API_KEY"] == "k"
    assert "TELEGRAM_BOT_TOKEN" not in env


def test_logs_hide_secret_values(capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import logging

    env = {
        "TELEGRAM_BOT_TOKEN": "123456:SECRET-token-value",
        "PI_BRIDGE_STORE": "redis://:pa55word1@h",
    }
    assert secret_values(env) == {"123456:SECRET-token-value", "pa55word1"}
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging("INFO", "json", env, stream)
        logging.getLogger("httpx").warning(
            "POST %s", "https://x/bot123456:SECRET-token-value/getMe"
        )
        try:
            raise RuntimeError("auth pa55word1 refused")
        except RuntimeError:
            logging.getLogger("bridge.test").exception("store failed")
    finally:
        root.handlers[:], root.level = saved
        logging.captureWarnings(False)
    out = stream.getvalue()
    assert "SECRET-token-value" not in out
    assert "pa55word1" not in out
    assert out.count("***") >= 2
    assert '"level": "warning"' in out


def test_redact_filter_keeps_ordinary_records() -> None:
    import logging

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("world",), None)
    assert RedactSecrets(Redactor(["longsecretvalue"])).filter(record)
    assert record.getMessage() == "hello world"


CHATS = """
[defaults]
busy_policy = "steer"
[chats."tg:1"]
workspace = "projects/site"
agent_command = "pi --mode rpc --model a/b"
approvers = ["7"]
busy_policy = "ask"
[chats."slack:T1:C2"]
verbosity = "off"
[chats."slack:T1:C2:171.5"]
busy_policy = "follow_up"
"""


@pytest.mark.parametrize(
    ("key", "argv0", "workspace", "approvers", "policy", "verbosity"),
    [
        ("tg:1", "pi", "projects/site", {"7", "9"}, "ask", "all"),
        ("tg:1:55", "pi", "projects/site", {"7", "9"}, "ask", "all"),  # a topic of tg:1
        ("tg:12", "default", None, {"9"}, "steer", "all"),  # not under tg:1
        ("slack:T1:C2:99.1", "default", None, {"9"}, "steer", "off"),  # a channel's thread
        ("slack:T1:C2:171.5", "default", None, {"9"}, "follow_up", "all"),  # its own key
        ("slack:T1:C3", "default", None, {"9"}, "steer", "all"),
    ],
)
def test_chat_overrides_apply_to_their_key_and_the_keys_under_it(
    tmp_path: Path,
    key: str,
    argv0: str,
    workspace: str | None,
    approvers: set[str],
    policy: str,
    verbosity: str,
) -> None:
    loaded = load(tmp_path, CHATS, {"PI_BRIDGE_AGENT_COMMAND": "default --mode rpc"})
    # The platform's approvers are added by the CLI per platform (`_for_platform`).
    options = dataclasses.replace(loaded.options, approvers=frozenset({"9"}))
    assert options.argv(key)[0] == argv0
    own = options.data_dir / "workspaces" / safe_name(key)
    assert options.workspace(key) == (tmp_path / workspace if workspace else own)
    assert options.approvers_of(key) == approvers
    assert options.settings_of(key).busy_policy == policy
    assert options.settings_of(key).verbosity == verbosity


def test_the_sandbox_is_on_by_default_and_hides_this_file_and_a_store_kept_elsewhere(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text('store = "sqlite:///srv/state/bridge.db"\n')
    loaded = load_config({**BASE_ENV, "PI_BRIDGE_CONFIG": str(config)}, cwd=tmp_path)
    sandbox = loaded.options.agent.sandbox
    assert (sandbox.mode, sandbox.network, sandbox.host_ports) == ("bwrap", "isolated", ())
    store = Path("/srv/state/bridge.db")
    assert sandbox.hidden == (config.resolve(), store, *(Path(f"{store}{s}") for s in SIDECARS))


SIDECARS = ("-wal", "-shm", "-journal")


def test_the_sandbox_settings_come_from_the_file_and_the_mode_from_the_environment(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    text = '[sandbox]\nnetwork = "off"\nread_write = ["cache"]\nread_only = ["/opt/models"]\n'
    config.write_text(text)
    env = {**BASE_ENV, "PI_BRIDGE_CONFIG": str(config), "PI_BRIDGE_SANDBOX": "off"}
    sandbox = load_config(env, cwd=tmp_path).options.agent.sandbox
    assert sandbox.mode == "off"
    assert sandbox.network == "off"
    assert sandbox.read_write == ((tmp_path / "cache").resolve(),)
    assert sandbox.read_only == (Path("/opt/models"),)


@pytest.mark.parametrize(
    ("file", "env", "network", "ports"),
    [
        ('network = "host"', {}, "host", ()),
        ('network = "on"', {}, "host", ()),  # the spelling from before "isolated"
        ("host_ports = [11434, 11434, 8080]", {}, "isolated", (11434, 8080)),
        ("", {"PI_BRIDGE_NETWORK": "off"}, "off", ()),
        ("", {"PI_BRIDGE_HOST_PORTS": "11434, 5432"}, "isolated", (11434, 5432)),
    ],
)
def test_the_agents_network_and_the_host_ports_it_reaches(
    tmp_path: Path, file: str, env: dict[str, str], network: str, ports: tuple[int, ...]
) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(f"[sandbox]\n{file}\n")
    loaded = load_config({**BASE_ENV, "PI_BRIDGE_CONFIG": str(config), **env}, cwd=tmp_path)
    sandbox = loaded.options.agent.sandbox
    assert (sandbox.network, sandbox.host_ports) == (network, ports)


@pytest.mark.parametrize("value", ["everywhere", "0", "65536", "http"])
def test_a_wrong_network_or_port_is_refused(tmp_path: Path, value: str) -> None:
    name = "PI_BRIDGE_NETWORK" if value.isalpha() else "PI_BRIDGE_HOST_PORTS"
    with pytest.raises(ConfigError) as caught:
        load_config({**BASE_ENV, name: value}, cwd=tmp_path)
    assert caught.value.problems[0].startswith(f"{name} (environment):")


def test_an_unknown_sandbox_mode_is_refused_by_its_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({**BASE_ENV, "PI_BRIDGE_SANDBOX": "docker"}, cwd=tmp_path)
    assert caught.value.problems[0].startswith("PI_BRIDGE_SANDBOX (environment):")


# (toml, env, the allowlist Telegram gets: None is everyone, an empty set nobody)
ALLOWLISTS: list[tuple[str, str, dict[str, str], frozenset[str] | None]] = [
    ("an empty list in the file", "[telegram]\nallowed_users = []\n", {}, frozenset()),
    ("only commas in the environment", "", {"TELEGRAM_ALLOWED_USERS": " , "}, frozenset()),
    ("ids", "", {"TELEGRAM_ALLOWED_USERS": "42, 43"}, frozenset({"42", "43"})),
    ("no list, everyone on purpose", "", {"PI_BRIDGE_ALLOW_EVERYONE": "true"}, None),
]


@pytest.mark.parametrize(
    ("toml", "env", "allowed"), [a[1:] for a in ALLOWLISTS], ids=[a[0] for a in ALLOWLISTS]
)
def test_an_empty_allowlist_lets_nobody_in_and_everyone_takes_saying_so(
    tmp_path: Path, toml: str, env: dict[str, str], allowed: frozenset[str] | None
) -> None:
    loaded = load(tmp_path, toml, {"TELEGRAM_BOT_TOKEN": "1:a", **env})
    assert loaded.telegram is not None
    assert loaded.telegram.allowed_users == allowed


@pytest.mark.parametrize("platform", ["telegram", "slack"])
def test_a_platform_without_an_allowlist_is_refused_at_start(tmp_path: Path, platform: str) -> None:
    env = {"TELEGRAM_BOT_TOKEN": "1:a"}
    if platform == "slack":
        env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    text = problems(tmp_path, None, env)
    assert f"{platform.upper()}_ALLOWED_USERS / {platform}.allowed_users: not set" in text
    assert "PI_BRIDGE_ALLOW_EVERYONE=true" in text


def test_the_per_user_cap_reaches_the_bridge(tmp_path: Path) -> None:
    assert load(tmp_path, None, {}).options.max_per_user == 4
    loaded = load(tmp_path, "[limits]\nmax_per_user = 2\n", {})
    assert loaded.options.max_per_user == 2
    assert load(tmp_path, None, {"PI_BRIDGE_MAX_PER_USER": "1"}).options.max_per_user == 1


def test_an_empty_allowlist_refuses_everyone_at_the_gate(tmp_path: Path) -> None:
    loaded = load(tmp_path, "[telegram]\nallowed_users = []\n", {"TELEGRAM_BOT_TOKEN": "1:a"})
    assert loaded.telegram is not None
    update = {
        "update_id": 1,
        "message": {
            "message_id": 5,
            "date": 0,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "is_bot": False, "first_name": "Alice"},
            "text": "hello",
        },
    }
    incoming = convert(update, Me(1, "bot"))
    assert incoming is not None
    gate = screen(incoming.inbound, loaded.telegram.allowed_users)
    assert gate is not None
    assert gate.action == "refuse"


@pytest.mark.parametrize("value", [" , ", ","])
def test_an_allowlist_set_to_nothing_in_the_environment_lets_nobody_in(
    tmp_path: Path, value: str
) -> None:
    # A list that is set but names nobody lets nobody in; only an unset one is "no list".
    loaded = load(
        tmp_path,
        None,
        {
            "TELEGRAM_BOT_TOKEN": "1:a",
            "TELEGRAM_ALLOWED_USERS": value,
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_APP_TOKEN": "xapp-1",
            "SLACK_ALLOWED_USERS": value,
        },
    )
    assert loaded.telegram is not None
    assert loaded.slack is not None
    assert loaded.telegram.allowed_users == frozenset()
    assert loaded.slack.allowed_users == frozenset()
    unset = load(tmp_path, None, {"TELEGRAM_BOT_TOKEN": "1:a", "PI_BRIDGE_ALLOW_EVERYONE": "true"})
    assert unset.telegram is not None
    assert unset.telegram.allowed_users is None


SLACK_HTTP = {
    "SLACK_BOT_TOKEN": "xoxb-1",
    "SLACK_SIGNING_SECRET": "sig",
    "SLACK_ALLOWED_USERS": "U1",
}


@pytest.mark.parametrize(
    ("toml", "env", "host"),
    [
        (None, {}, "127.0.0.1"),
        ('[slack]\nhttp_host = "::1"\n', {}, "::1"),
        ('[slack]\nhttp_host = "::1"\n', {"SLACK_HTTP_HOST": "0.0.0.0"}, "0.0.0.0"),
    ],
    ids=["by default", "from the file", "from the environment"],
)
def test_slack_http_mode_listens_on_loopback_unless_told_otherwise(
    tmp_path: Path, toml: str | None, env: dict[str, str], host: str
) -> None:
    loaded = load(tmp_path, toml, SLACK_HTTP | env)
    assert loaded.slack is not None
    assert loaded.slack.http_host == host
    bare = tmp_path / "no-file"  # the environment alone
    bare.mkdir()
    env_only = load(bare, None, SLACK_HTTP | env)
    assert env_only.slack is not None
    assert env_only.slack.http_host == ("127.0.0.1" if "SLACK_HTTP_HOST" not in env else host)


# The adapters' settings have one reader: the configuration (the environment names
# below were the adapters' own `from_env`'s; they now go through `ENV_NAMES`).


def test_slack_settings_come_from_the_documented_environment_names(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        None,
        {
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_APP_TOKEN": "xapp-1",
            "SLACK_API_BASE_URL": "http://127.0.0.1:9/api/",
            "SLACK_ALLOWED_USERS": "U1, U2",
            "SLACK_APPROVERS": "U1, S0LEADS",
            "SLACK_ALLOWED_CHANNELS": "C1,C2",
        },
    )
    settings = loaded.slack
    assert settings is not None
    assert settings.socket_mode
    assert settings.api_base_url == "http://127.0.0.1:9/api/"
    assert settings.allowed_users == frozenset({"U1", "U2"})
    assert settings.approvers == frozenset({"U1", "S0LEADS"})
    assert settings.user_groups == frozenset({"S0LEADS"})
    assert settings.allowed_channels == frozenset({"C1", "C2"})
    assert "xoxb" not in repr(settings)
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN"):
        load(tmp_path, None, {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_ALLOWED_USERS": "U1"})


def test_telegram_settings_come_from_the_documented_environment_names(tmp_path: Path) -> None:
    env = {
        "TELEGRAM_BOT_TOKEN": "1:abc",
        "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9/bot",
        "TELEGRAM_ALLOWED_USERS": "42, 7",
        "TELEGRAM_APPROVERS": "42",
    }
    loaded = load(tmp_path, None, env).telegram
    assert loaded is not None
    assert (loaded.token, loaded.base_url) == ("1:abc", "http://127.0.0.1:9/bot")
    assert (loaded.allowed_users, loaded.approvers) == (frozenset({"42", "7"}), frozenset({"42"}))
    assert "1:abc" not in repr(loaded)
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        load(tmp_path, None, {"TELEGRAM_ALLOWED_USERS": "42"})


def test_every_platform_environment_name_reaches_the_settings(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        None,
        {
            "TELEGRAM_BOT_TOKEN": "1:abc",
            "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9/bot",
            "TELEGRAM_FILE_BASE_URL": "http://127.0.0.1:9/file/bot",
            "TELEGRAM_ALLOWED_USERS": "42",
            "TELEGRAM_APPROVERS": "42",
            "TELEGRAM_WEBHOOK_URL": "https://bot.example/hook",
            "TELEGRAM_WEBHOOK_SECRET": "s3cret",
            "TELEGRAM_WEBHOOK_LISTEN": "0.0.0.0",
            "TELEGRAM_WEBHOOK_PORT": "8444",
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_SIGNING_SECRET": "sig",
            "SLACK_API_BASE_URL": "http://127.0.0.1:9/api/",
            "SLACK_ALLOWED_USERS": "U1",
            "SLACK_APPROVERS": "U1",
            "SLACK_ALLOWED_CHANNELS": "C1",
            "SLACK_HTTP_PORT": "3100",
            "SLACK_HTTP_HOST": "0.0.0.0",
        },
    )
    assert loaded.telegram == TelegramSettings(
        token="1:abc",
        base_url="http://127.0.0.1:9/bot",
        base_file_url="http://127.0.0.1:9/file/bot",
        allowed_users=frozenset({"42"}),
        approvers=frozenset({"42"}),
        webhook_url="https://bot.example/hook",
        webhook_secret="s3cret",
        webhook_listen="0.0.0.0",
        webhook_port=8444,
    )
    assert loaded.slack == SlackSettings(
        bot_token="xoxb-1",
        signing_secret="sig",
        api_base_url="http://127.0.0.1:9/api/",
        allowed_users=frozenset({"U1"}),
        approvers=frozenset({"U1"}),
        allowed_channels=frozenset({"C1"}),
        http_port=3100,
        http_host="0.0.0.0",
    )


def test_an_empty_channel_list_limits_no_channel(tmp_path: Path) -> None:
    # Unlike an empty user list (nobody), an empty channel list is no limit at all.
    loaded = load(tmp_path, "[slack]\nallowed_channels = []\n", SLACK_HTTP)
    assert loaded.slack is not None
    assert loaded.slack.allowed_channels is None


@pytest.mark.parametrize(
    ("section", "settings", "file_only"),
    [(TelegramSection, TelegramSettings, TELEGRAM_ONLY), (SlackSection, SlackSettings, set())],
    ids=["telegram", "slack"],
)
def test_a_platform_section_holds_exactly_its_settings_fields(
    section: type[BaseModel], settings: type[object], file_only: AbstractSet[str]
) -> None:
    # The settings are built from the section's dump: a field missing from either side
    # would be silently left at its default.
    fields = {f.name for f in dataclasses.fields(settings)}  # type: ignore[arg-type]
    assert set(section.model_fields) - file_only == fields


def test_a_webhook_without_a_configured_secret_gets_a_new_one_at_every_start(
    tmp_path: Path,
) -> None:
    env = {**BASE_ENV, "TELEGRAM_BOT_TOKEN": "1:a", "TELEGRAM_ALLOWED_USERS": "1"}
    env["TELEGRAM_WEBHOOK_URL"] = "https://bot.example/hook"
    first, second = (load_config(env, cwd=tmp_path).telegram for _ in range(2))
    assert first is not None
    assert second is not None
    assert first.webhook_secret
    assert second.webhook_secret
    assert len(first.webhook_secret) >= 32
    assert first.webhook_secret != second.webhook_secret
    configured = load_config({**env, "TELEGRAM_WEBHOOK_SECRET": "set-by-me"}, cwd=tmp_path)
    assert configured.telegram is not None
    assert configured.telegram.webhook_secret == "set-by-me"


def test_a_webhook_without_its_secret_is_refused_by_the_settings_themselves() -> None:
    # The one check: it holds for settings the configuration builds and for any other.
    with pytest.raises(ValueError, match="webhook_secret"):
        TelegramSettings(token="1:a", webhook_url="https://bot.example/hook")
    assert TelegramSettings(token="1:a", webhook_url="https://x", webhook_secret="s").webhook_url


def test_transcription_takes_its_key_from_the_named_variable_and_not_into_the_agent(
    tmp_path: Path,
) -> None:
    env = {
        "MY_WHISPER_KEY": "sk-SECRET-WHISPER",
        "PI_BRIDGE_TRANSCRIBE_URL": "http://127.0.0.1:8000",
        "PI_BRIDGE_TRANSCRIBE_MODEL": "small.en",
        "PI_BRIDGE_TRANSCRIBE_KEY_ENV": "MY_WHISPER_KEY",
        "PI_BRIDGE_AGENT_ENV": "MY_WHISPER_KEY_NOT,OTHER",
    }
    options = load(tmp_path, None, env).options
    assert options.transcribe is not None
    assert (options.transcribe.url, options.transcribe.model) == (
        "http://127.0.0.1:8000",
        "small.en",
    )
    assert options.transcribe.key == "sk-SECRET-WHISPER"
    assert "sk-SECRET-WHISPER" not in str(options.agent.env)
    assert "sk-SECRET-WHISPER" not in repr(options.transcribe)  # never in a log line


def test_without_a_transcription_url_voice_is_kept_as_files(tmp_path: Path) -> None:
    assert load(tmp_path, None).options.transcribe is None


def test_the_transcription_key_may_not_be_passed_to_the_agent(tmp_path: Path) -> None:
    env = {
        "MY_WHISPER_KEY": "sk-SECRET-WHISPER",
        "PI_BRIDGE_TRANSCRIBE_URL": "http://127.0.0.1:8000",
        "PI_BRIDGE_TRANSCRIBE_KEY_ENV": "MY_WHISPER_KEY",
        "PI_BRIDGE_AGENT_ENV": "MY_WHISPER_KEY",
    }
    assert "refusing to pass the transcription key MY_WHISPER_KEY" in problems(tmp_path, None, env)


def test_approvals_are_on_for_dangerous_calls_unless_configured_otherwise(tmp_path: Path) -> None:
    assert load(tmp_path, None).options.approvals == ApprovalOptions(mode="dangerous")
    toml = '[approvals]\nmode = "writes"\nnotify_approvers = "dm"\npatterns = ["\\\\bnuke\\\\b"]\n'
    loaded = load(tmp_path, toml, {"PI_BRIDGE_APPROVALS": "all"})
    assert loaded.options.approvals == ApprovalOptions(
        mode="all", patterns=(r"\bnuke\b",), notify_approvers="dm"
    )


@pytest.mark.parametrize(
    ("toml", "env", "named"),
    [
        ('[approvals]\npatterns = ["(unclosed"]\n', {}, "approvals.patterns"),
        ("", {"PI_BRIDGE_APPROVALS": "sometimes"}, "PI_BRIDGE_APPROVALS"),
        ('[approvals]\nnotify_approvers = "email"\n', {}, "notify_approvers"),
    ],
)
def test_approval_mistakes_are_named(
    tmp_path: Path, toml: str, env: dict[str, str], named: str
) -> None:
    assert named in problems(tmp_path, toml, env)


# --- scheduled work ----------------------------------------------------------------------


def test_schedules_settings_and_a_chats_time_zone_reach_the_options(tmp_path: Path) -> None:
    toml = (
        "[schedules]\ncatch_up = 600\nmax_per_user = 3\ntick = 5\n"
        '[chats."tg:42"]\ntimezone = "Europe/Berlin"\n'
    )
    options = load(tmp_path, toml).options
    assert (options.schedules.catch_up, options.schedules.max_per_user) == (600, 3)
    assert options.schedules.tick == 5
    assert options.timezone_of("tg:42") == "Europe/Berlin"
    assert options.timezone_of("tg:7") == "UTC"


def test_an_unknown_time_zone_of_a_chat_is_named(tmp_path: Path) -> None:
    said = problems(tmp_path, '[chats."tg:42"]\ntimezone = "Mars/Olympus"\n')
    assert 'chats."tg:42".timezone' in said
    assert "Mars/Olympus" in said


def test_notify_settings_come_from_the_file_and_a_chat_overrides_some_of_them(
    tmp_path: Path,
) -> None:
    toml = (
        '[notify]\nquiet_under = 60\ndone = false\n[chats."tg:-1001".notify]\nquestions = false\n'
    )
    options = load(tmp_path, toml).options
    assert options.notify_of("tg:42") == NotifySettings(questions=True, done=False, quiet_under=60)
    assert options.notify_of("tg:-1001:7") == NotifySettings(False, False, 60)
    (tmp_path / "bare").mkdir()
    assert load(tmp_path / "bare", None).options.notify == NotifySettings()  # both, 30 s
    assert "notify.quiet_under" in problems(tmp_path, "[notify]\nquiet_under = -1\n")

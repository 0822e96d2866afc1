"""Discord in the configuration: the documented environment names and the `[discord]`
table become `DiscordSettings`; the token only from the environment; a table without
it, or with no allowlist, is named as a problem; roles alone are an allowlist."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from adapters.discord.settings import DiscordSettings
from bridge.app.config import ConfigError, load_config
from bridge.app.platforms import PLATFORMS, open_platforms

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.app.config import Loaded

BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}


def load(tmp_path: Path, env: dict[str, str], toml: str | None = None) -> Loaded:
    full = {**BASE_ENV, **env}
    if toml is not None:
        path = tmp_path / "pi-bridge.toml"
        path.write_text(toml)
        full["PI_BRIDGE_CONFIG"] = str(path)
    return load_config(full, cwd=tmp_path)


def test_discord_settings_come_from_the_documented_environment_names(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        {
            "DISCORD_BOT_TOKEN": "MTA.discord-token",
            "DISCORD_ALLOWED_USERS": "100, 101",
            "DISCORD_ALLOWED_ROLES": "7",
            "DISCORD_APPROVERS": "100, 8",
            "DISCORD_ALLOWED_CHANNELS": "10,11",
            "DISCORD_API_URL": "http://127.0.0.1:9/api/v10",
        },
    )
    assert loaded.platforms == ("discord",)
    settings = loaded.settings(DiscordSettings)
    assert settings is not None
    assert settings.token == "MTA.discord-token"
    assert settings.allowed_users == frozenset({"100", "101", "7"})  # roles let members in
    assert settings.allowed_roles == frozenset({"7"})
    assert settings.approvers == frozenset({"100", "8"})
    assert settings.allowed_channels == frozenset({"10", "11"})
    assert settings.api_url == "http://127.0.0.1:9/api/v10"
    assert settings.message_content
    assert "discord-token" not in repr(settings)
    [served] = loaded.served
    narrowed = served.options(loaded.options)  # what Discord's bridge admits by
    assert narrowed.allowed_users == settings.allowed_users
    assert narrowed.approvers >= settings.approvers
    assert narrowed.key_prefix == "discord:"


def test_a_role_alone_is_an_allowlist_not_everyone(tmp_path: Path) -> None:
    loaded = load(tmp_path, {"DISCORD_BOT_TOKEN": "t0ken", "DISCORD_ALLOWED_ROLES": "7"})
    settings = loaded.settings(DiscordSettings)
    assert settings is not None
    assert settings.allowed_users == frozenset({"7"})
    assert open_platforms(loaded.config) == []


def test_the_table_takes_what_the_environment_does_but_the_token(tmp_path: Path) -> None:
    toml = '[discord]\nallowed_users = ["100"]\nmessage_content = false\nallowed_channels = []\n'
    loaded = load(tmp_path, {"DISCORD_BOT_TOKEN": "t0ken"}, toml)
    settings = loaded.settings(DiscordSettings)
    assert settings is not None
    assert not settings.message_content
    assert settings.allowed_channels is None  # an empty list limits nothing
    with pytest.raises(ConfigError, match="DISCORD_BOT_TOKEN"):
        load(tmp_path, {}, '[discord]\nbot_token = "in-the-file"\nallowed_users = ["1"]\n')


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DISCORD_ALLOWED_USERS": "100"}, "DISCORD_BOT_TOKEN (environment): not set"),
        ({"DISCORD_BOT_TOKEN": "t0ken"}, "DISCORD_ALLOWED_USERS / discord.allowed_users"),
        (
            {"DISCORD_BOT_TOKEN": "t0ken", "DISCORD_ALLOWED_USERS": "1", "DISCORD_API_URL": "x"},
            "DISCORD_API_URL (environment): expected an http",
        ),
    ],
    ids=["no token", "open to everyone", "not a URL"],
)
def test_a_half_done_setup_is_named(tmp_path: Path, env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, env)
    assert any(named in problem for problem in refused.value.problems), refused.value.problems


def test_discord_is_one_descriptor_among_the_platforms() -> None:
    [discord] = [p for p in PLATFORMS if p.name == "discord"]
    assert discord.key_prefix == "discord:"
    assert not discord.learns_name


def test_per_channel_settings_are_keyed_by_the_channel(tmp_path: Path) -> None:
    toml = '[chats."discord:1:10"]\nbusy_policy = "ask"\n[discord]\nallowed_users = ["1"]\n'
    loaded = load(tmp_path, {"DISCORD_BOT_TOKEN": "t0ken"}, toml)
    thread = "discord:1:10:20"  # a thread of channel 10 in server 1
    assert loaded.options.settings_of(thread).busy_policy == "ask"
    assert loaded.options.settings_of("discord:1:11:21").busy_policy == "steer"
    [served] = loaded.served
    assert served.polls  # one frontend at a time holds the gateway

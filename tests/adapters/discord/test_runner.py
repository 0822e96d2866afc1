"""The runner's parts that need no agent: `pi-bridge check` against the fake Discord,
the slash commands derived from the registry, and the settings' invariants."""

from __future__ import annotations

import pytest

from adapters.discord.runner import check, command_tree, make_client
from adapters.discord.settings import DiscordSettings
from bridge.controls.table import COMMANDS
from tests.support.fake_discord import TOKEN, FakeDiscord

pytestmark = pytest.mark.anyio


def settings(fake: FakeDiscord, **fields: object) -> DiscordSettings:
    return DiscordSettings(token=fields.pop("token", TOKEN), api_url=fake.api_url, **fields)  # type: ignore[arg-type]


async def test_check_names_the_bot_its_intent_and_its_servers(fake: FakeDiscord) -> None:
    said = await check(settings(fake))
    assert "@pi" in said
    assert "Message Content intent is enabled" in said
    assert "in 1 server(s) with the permissions it needs" in said


async def test_check_names_the_permissions_a_server_withholds(fake: FakeDiscord) -> None:
    fake.withheld = (1 << 35) | (1 << 6)  # Create Public Threads, Add Reactions
    with pytest.raises(RuntimeError, match="Team") as refused:
        await check(settings(fake))
    assert "lacks Create Public Threads, Add Reactions" in str(refused.value)


async def test_check_refuses_an_app_without_the_content_intent_it_would_ask_for() -> None:
    async with FakeDiscord(privileged_intents=frozenset({"members"})) as fake:
        with pytest.raises(RuntimeError, match="Developer Portal"):
            await check(settings(fake))
        said = await check(settings(fake, message_content=False))
    assert "without the message-content intent" in said


async def test_check_refuses_a_wrong_token_without_showing_it(fake: FakeDiscord) -> None:
    with pytest.raises(RuntimeError, match="401") as refused:
        await check(settings(fake, token="not-the-token"))
    assert "not-the-token" not in str(refused.value)


async def test_the_slash_commands_are_the_registrys_and_pi() -> None:
    async def used(interaction: object) -> None:
        raise AssertionError("not called here")

    tree = command_tree(make_client(DiscordSettings(token="t")), used)
    names = [c.name for c in tree.get_commands()]
    assert names == ["pi", *(c.name for c in COMMANDS.commands)]
    with_text = {c.name for c in tree.get_commands() if c.to_dict(tree)["options"]}
    assert with_text == {"pi", *(c.name for c in COMMANDS.commands if c.usage)}
    assert all(1 <= len(c.to_dict(tree)["description"]) <= 100 for c in tree.get_commands())


def test_roles_allow_their_members_and_a_role_alone_is_an_allowlist() -> None:
    by_role = DiscordSettings(token="t", allowed_roles=frozenset({"7"}))
    assert by_role.allowed_users == frozenset({"7"})
    both = DiscordSettings(
        token="t", allowed_users=frozenset({"1"}), allowed_roles=frozenset({"7"})
    )
    assert both.allowed_users == frozenset({"1", "7"})
    assert DiscordSettings(token="t").allowed_users is None
    assert "secret-token" not in repr(DiscordSettings(token="secret-token"))
    with pytest.raises(ValueError, match="DISCORD_BOT_TOKEN"):
        DiscordSettings(token="")

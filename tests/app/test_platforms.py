"""The platforms' descriptors (bridge/app/platforms.py): each configured platform is
built from its section and served with its options, its bridge and its runner; one
not configured is not. The descriptors are real; the runner served in the last
tests is a stand-in platform's, defined here."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from adapters.slack.settings import SlackSettings
from adapters.telegram.settings import TelegramSettings
from bridge.app import serving
from bridge.app.config import load_config
from bridge.app.metrics import Metrics
from bridge.app.platforms import KEY_PREFIXES, PLATFORMS, Platform, Serving, slack_settings
from bridge.app.run import plain_bridges
from bridge.model import ChatRef, Inbound, Sender
from bridge.store import open_store
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.app.config import Loaded
    from bridge.app.schema import SlackSection
    from bridge.platform import Adapter

pytestmark = pytest.mark.anyio

BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}
TELEGRAM = {"TELEGRAM_BOT_TOKEN": "1:abc", "TELEGRAM_ALLOWED_USERS": "42"}
SLACK = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "SLACK_ALLOWED_USERS": "U1"}
WEBHOOK = {"TELEGRAM_WEBHOOK_URL": "https://bot.example/tg", "TELEGRAM_WEBHOOK_SECRET": "s3"}
SETTINGS = {"telegram": TelegramSettings, "slack": SlackSettings}


def load(tmp_path: Path, env: dict[str, str]) -> Loaded:
    return load_config(BASE_ENV | env, cwd=tmp_path)


@pytest.mark.parametrize(
    ("env", "served"),
    [
        pytest.param({}, (), id="none"),
        pytest.param(TELEGRAM, ("telegram",), id="telegram"),
        pytest.param(SLACK, ("slack",), id="slack"),
        pytest.param(TELEGRAM | SLACK, ("telegram", "slack"), id="both"),
    ],
)
def test_each_configured_platform_is_built_from_its_section_and_no_other(
    tmp_path: Path, env: dict[str, str], served: tuple[str, ...]
) -> None:
    loaded = load(tmp_path, env)

    assert loaded.platforms == served
    for platform in loaded.served:
        [descriptor] = [p for p in PLATFORMS if p.name == platform.name]
        assert platform.traits is descriptor
        assert isinstance(platform.settings, SETTINGS[platform.name])
        options = platform.options(loaded.options)
        assert options.key_prefix == descriptor.key_prefix
        assert options.allowed_users == platform.settings.allowed_users
    for descriptor in PLATFORMS:
        if descriptor.name not in served:
            assert descriptor.section(loaded.config) is None


def test_the_platforms_are_told_apart_by_name_and_by_key() -> None:
    names = [p.name for p in PLATFORMS]
    prefixes = [p.key_prefix for p in PLATFORMS]

    assert len(set(names)) == len(names)
    assert len(set(prefixes)) == len(prefixes)
    # `chats."<key>"` and the projects' keys are checked against these.
    assert set(prefixes) <= set(KEY_PREFIXES)
    assert not any(a != b and b.startswith(a) for a in prefixes for b in prefixes)


@pytest.mark.parametrize(
    ("env", "polls"),
    [
        pytest.param(TELEGRAM, {"telegram": True}, id="telegram-long-polls"),
        pytest.param(TELEGRAM | WEBHOOK, {"telegram": False}, id="telegram-on-a-webhook"),
        pytest.param(SLACK, {"slack": False}, id="slack-never"),
    ],
)
def test_only_a_platform_that_long_polls_asks_for_the_polling_lease(
    tmp_path: Path, env: dict[str, str], polls: dict[str, bool]
) -> None:
    loaded = load(tmp_path, env)

    assert {p.name: p.polls for p in loaded.served} == polls


@pytest.mark.parametrize(
    ("env", "commands", "learns_name"),
    [
        pytest.param(TELEGRAM, ("/",), True, id="telegram"),
        pytest.param(SLACK, ("/", "!"), False, id="slack"),
    ],
)
def test_what_a_platforms_bridge_takes_comes_from_its_descriptor(
    tmp_path: Path, env: dict[str, str], commands: tuple[str, ...], learns_name: bool
) -> None:
    [platform] = load(tmp_path, env).served

    assert platform.traits.commands == commands
    assert platform.traits.learns_name is learns_name


def test_a_workers_adapter_is_made_without_connecting(tmp_path: Path) -> None:
    loaded = load(tmp_path, TELEGRAM | SLACK)

    adapters = {p.name: p.adapter() for p in loaded.served}  # no platform is reachable here

    assert {name: type(a).__name__ for name, a in adapters.items()} == {
        "telegram": "TelegramAdapter",
        "slack": "SlackAdapter",
    }


# --- served: a stand-in platform, with the real serving and bridges --------------------------

SEEN = ChatRef("c1")


def _no_adapter(settings: SlackSettings) -> Adapter:
    raise AssertionError("a worker's adapter is not asked for here")


async def _check(settings: SlackSettings) -> str:
    return "answers"


def pretend(handled: anyio.Event) -> Platform[SlackSection, SlackSettings]:
    """A stand-in platform whose runner hands its bridge one inbound, sets `handled`
    and waits for the stop."""

    async def serve(settings: SlackSettings, serving: Serving) -> None:
        async with serving.bridge(RecordingAdapter(), "pretend-bot") as handler:
            sender = Sender(next(iter(settings.allowed_users or {"U1"})))
            await handler.handle(Inbound("pretend:c1", SEEN, sender, "e1", "/help"))
            handled.set()
            await serving.stopping.wait()

    return Platform(
        name="pretend",
        key_prefix="pretend:",
        commands=("/", "?"),
        learns_name=True,
        section=lambda config: config.slack,  # its section, borrowed
        settings=slack_settings,
        serve=serve,
        adapter=_no_adapter,
        check=_check,
    )


async def test_a_configured_platform_is_served_with_its_options_its_bridge_and_its_runner(
    tmp_path: Path,
) -> None:
    loaded = load(tmp_path, SLACK | {"PI_BRIDGE_DATA_DIR": str(tmp_path / "data")})
    problems: list[str] = []
    handled, stopping = anyio.Event(), anyio.Event()
    platform = pretend(handled).configured(loaded.config, problems)
    assert platform is not None
    assert problems == []
    metrics = Metrics()
    store = await open_store("sqlite", tmp_path / "data")
    try:
        make = plain_bridges(store, metrics)
        async with anyio.create_task_group() as tg:
            tg.start_soon(serving.serve, platform, loaded.options, store, stopping, make)
            with anyio.fail_after(10):
                await handled.wait()
            bridge = metrics.bridges["pretend"]
            assert metrics.inbound["pretend"] == 1
            assert bridge.options.key_prefix == "pretend:"
            assert bridge.options.allowed_users == frozenset({"U1"})
            assert bridge.services.prefixes == ("/", "?")
            assert bridge.services.bot_name == "pretend-bot"
            stopping.set()
    finally:
        await store.aclose()
    assert await platform.check() == "answers"


def test_a_platform_not_configured_is_not_bound(tmp_path: Path) -> None:
    loaded = load(tmp_path, TELEGRAM)
    problems: list[str] = []

    assert pretend(anyio.Event()).configured(loaded.config, problems) is None  # no [slack]
    assert problems == []

"""An update the platform's library or our converter cannot read is skipped, not fatal:
`pi-bridge run` as a process against the fake Telegram (long polling and webhook) and
the fake Slack (Socket Mode and HTTP).

Each test sends what cannot be decoded, then a normal `/help`: the help is answered,
the process is still running, the bad delivery was confirmed (Telegram's offset moved
past it, the webhook and Slack answered it with 200 or an ack) so it does not come back,
and `pi_bridge_undecodable_updates_total` counts it. Scaled out, the frontend (which
decodes) skips and counts it, and a worker answers the help.
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from tests.app.test_run_e2e import sample
from tests.support.cli import WAIT, bridge_process, cli_env, get, stop, write_config
from tests.support.fake_slack import ALICE, DM_CHANNEL, FakeSlack
from tests.support.fake_telegram import SECRET, TOKEN, FakeTelegram
from tests.support.loopback import free_port, until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

    from tests.support.fake_slack import Json

pytestmark = pytest.mark.anyio

CHAT = 42
HELP = "Talking to the agent"  # the first line of /help's answer
METRIC = "pi_bridge_undecodable_updates_total"
CONFIG = "[telegram]\npoll_timeout = 1\n"


def telegram_env(tmp_path: Path, telegram: FakeTelegram, port: int, **more: str) -> dict[str, str]:
    return cli_env(
        tmp_path,
        None,
        PI_BRIDGE_CONFIG=write_config(tmp_path, CONFIG),
        PI_BRIDGE_METRICS_PORT=str(port),
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
        TELEGRAM_ALLOWED_USERS=str(CHAT),
        **more,
    )


def slack_env(tmp_path: Path, slack: FakeSlack, port: int, **more: str) -> dict[str, str]:
    return cli_env(
        tmp_path,
        None,
        PI_BRIDGE_METRICS_PORT=str(port),
        SLACK_BOT_TOKEN=slack.bot_token,
        SLACK_API_BASE_URL=slack.base_url,
        SLACK_ALLOWED_USERS=ALICE,
        **more,
    )


def unreadable_message(telegram: FakeTelegram) -> dict[str, Any]:
    """A message python-telegram-bot 22 cannot decode (`KeyError: 'inline_keyboard'`):
    its `reply_markup` is an empty object."""
    body = copy.deepcopy(telegram.message(CHAT, "a secret nobody may log").json())
    telegram.updates.pop()  # queued as it should be: taken back, to be queued broken
    return {"message": {**body, "reply_markup": {}}}


async def undecodable(port: int, platform: str, at_least: int) -> float:
    """The counter once it reached `at_least` (counters land a moment after the chat)."""
    with anyio.fail_after(WAIT):
        while True:
            with contextlib.suppress(OSError):
                status, text = await get(port, "/metrics")
                if status == 200 and sample(text, METRIC, platform=platform) >= at_least:
                    return sample(text, METRIC, platform=platform)
            await anyio.sleep(0.2)


async def still_running(process: Process) -> None:
    await anyio.sleep(0.5)  # long enough for a crash after the answer to show
    assert process.returncode is None, "the bridge ended"
    assert await stop(process) == 0


async def test_a_telegram_update_the_library_cannot_decode_is_confirmed_and_skipped(
    tmp_path: Path,
) -> None:
    metrics = free_port()
    async with FakeTelegram() as telegram:
        env = telegram_env(tmp_path, telegram, metrics)
        async with bridge_process(tmp_path, env, "bridge.log") as process:
            bad = telegram.raw(unreadable_message(telegram))
            telegram.message(CHAT, "/help")
            await telegram.bot_message(HELP, CHAT, within=WAIT)
            await until(lambda: telegram.confirmed > bad, WAIT)
            assert await undecodable(metrics, "telegram", 1) == 1
            await still_running(process)
    assert telegram.handed[bad] == 1  # never handed out again
    assert "a secret nobody may log" not in (tmp_path / "bridge.log").read_text()


@pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server")
async def test_a_frontend_skips_and_counts_an_update_the_library_cannot_decode(
    tmp_path: Path,
) -> None:
    metrics = free_port()
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram:
            env = telegram_env(tmp_path, telegram, metrics, PI_BRIDGE_STORE=redis.url)
            frontend = env | {"PI_BRIDGE_ROLE": "frontend"}
            worker = env | {"PI_BRIDGE_ROLE": "worker"}
            worker.pop("PI_BRIDGE_METRICS_PORT")
            async with (
                bridge_process(tmp_path, frontend, "frontend.log") as front,
                bridge_process(tmp_path, worker, "worker.log") as work,
            ):
                bad = telegram.raw(unreadable_message(telegram))
                telegram.message(CHAT, "/help")
                await telegram.bot_message(HELP, CHAT, within=WAIT)
                await until(lambda: telegram.confirmed > bad, WAIT)
                assert await undecodable(metrics, "telegram", 1) == 1
                await still_running(front)
                assert await stop(work) == 0
    assert telegram.handed[bad] == 1


async def test_a_webhook_update_the_library_cannot_decode_is_answered_200_and_skipped(
    tmp_path: Path,
) -> None:
    metrics, hook = free_port(), free_port()
    async with FakeTelegram() as telegram:
        env = telegram_env(
            tmp_path,
            telegram,
            metrics,
            TELEGRAM_WEBHOOK_URL=f"http://127.0.0.1:{hook}/telegram/hook",
            TELEGRAM_WEBHOOK_SECRET=SECRET,
            TELEGRAM_WEBHOOK_LISTEN="127.0.0.1",
            TELEGRAM_WEBHOOK_PORT=str(hook),
        )
        async with bridge_process(tmp_path, env, "bridge.log") as process:
            await until(lambda: telegram.webhook, WAIT)
            telegram.raw(unreadable_message(telegram))
            telegram.message(CHAT, "/help")
            assert await telegram.push() == [200, 200]  # Telegram will not send it again
            await telegram.bot_message(HELP, CHAT, within=WAIT)
            assert await undecodable(metrics, "telegram", 1) == 1
            await still_running(process)
    assert "a secret nobody may log" not in (tmp_path / "bridge.log").read_text()


def unreadable_events(slack: FakeSlack) -> list[Json]:
    """Two event payloads: one bolt cannot take (its event is not an object), one our
    converter cannot (a direct message whose text is not a string)."""
    not_an_object = {**slack.event_callback({"type": "message"}), "event": ["not", "an", "event"]}
    text_not_a_string = slack.event_callback(
        {
            "type": "message",
            "channel_type": "im",
            "user": ALICE,
            "text": {"secret": "a secret nobody may log"},
            "ts": slack.new_ts(),
            "channel": DM_CHANNEL,
        }
    )
    return [not_an_object, text_not_a_string]


async def slack_help_after_unreadable_events(slack: FakeSlack, metrics: int) -> None:
    """The two unreadable events, then `!help` in a direct message, answered."""
    bad = [await slack.send_envelope("events_api", payload) for payload in unreadable_events(slack)]
    await slack.dm("!help")
    await slack.wait_until(lambda: any(HELP in m.visible for m in slack.messages.values()), WAIT)
    for envelope in bad:
        await slack.wait_until(lambda e=envelope: e["envelope_id"] in slack.acks, WAIT)  # type: ignore[misc]
    assert await undecodable(metrics, "slack", 2) == 2


async def test_slack_events_bolt_or_the_converter_cannot_read_are_acked_and_skipped(
    tmp_path: Path,
) -> None:
    metrics = free_port()
    async with FakeSlack() as slack:
        env = slack_env(tmp_path, slack, metrics, SLACK_APP_TOKEN=slack.app_token)
        async with bridge_process(tmp_path, env, "bridge.log") as process:
            await slack.connected()
            await slack_help_after_unreadable_events(slack, metrics)
            await still_running(process)
    assert "a secret nobody may log" not in (tmp_path / "bridge.log").read_text()


async def test_slack_events_over_http_that_cannot_be_read_are_answered_200_and_skipped(
    tmp_path: Path,
) -> None:
    metrics, port = free_port(), free_port()
    config = write_config(tmp_path, '[slack]\nhttp_host = "127.0.0.1"\n')
    async with FakeSlack(events_url=f"http://127.0.0.1:{port}/slack/events") as slack:
        env = slack_env(
            tmp_path,
            slack,
            metrics,
            PI_BRIDGE_CONFIG=config,
            SLACK_SIGNING_SECRET=slack.signing_secret,
            SLACK_HTTP_PORT=str(port),
        )
        async with bridge_process(tmp_path, env, "bridge.log") as process:

            async def listening() -> bool:
                with contextlib.suppress(OSError):
                    return (await slack.verify_url())[0] == 200
                return False

            with anyio.fail_after(WAIT):
                while not await listening():  # noqa: ASYNC110 (until the port listens)
                    await anyio.sleep(0.2)
            await slack_help_after_unreadable_events(slack, metrics)
            await still_running(process)
    assert set(slack.answers.values()) == {200}
    assert "a secret nobody may log" not in (tmp_path / "bridge.log").read_text()

"""Nothing the bridge logs or prints carries a secret, whatever its shape or length."""

from __future__ import annotations

import io
import json
import logging
import warnings
from typing import TYPE_CHECKING

import pytest

from bridge.logs import MIN_SECRET, RedactedStream, redactor, secret_values, setup_logging
from tests.support.cli import cli_env, run_cli
from tests.support.fake_telegram import FakeTelegram

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


# (environment, the secret that must not appear)
SECRETS: list[tuple[str, dict[str, str], str]] = [
    ("a token with a quote and a backslash", {"SLACK_BOT_TOKEN": 'xo"b\\c'}, 'xo"b\\c'),
    ("a short token", {"TELEGRAM_WEBHOOK_SECRET": "k9Zq"}, "k9Zq"),
    (
        "a redis password in the query",
        {"PI_BRIDGE_STORE": "redis://db:6379/0?password=hunter2-pw"},
        "hunter2-pw",
    ),
    (
        "a redis password in the user part, percent-encoded",
        {"PI_BRIDGE_STORE": "redis://:p%40ss-word@db:6379/0"},
        "p@ss-word",
    ),
]


@pytest.mark.parametrize("fmt", ["json", "console"])
@pytest.mark.parametrize(("env", "secret"), [s[1:] for s in SECRETS], ids=[s[0] for s in SECRETS])
@pytest.mark.usefixtures("restore_logging")
def test_a_logged_secret_is_hidden_in_every_format(
    fmt: str, env: dict[str, str], secret: str
) -> None:
    stream = io.StringIO()
    setup_logging("INFO", fmt, env=env, stream=stream)
    log = logging.getLogger("test")
    log.warning("connecting with %s", secret)
    try:
        raise RuntimeError(f"refused: {secret}")
    except RuntimeError:
        log.exception("failed")
    text = stream.getvalue()
    if fmt == "json":  # what a log shipper reads: the decoded fields
        text += "".join(str(json.loads(line)) for line in text.splitlines())
    assert secret not in text
    assert json.dumps(secret)[1:-1] not in text  # nor escaped as JSON
    assert "***" in text


def test_values_too_short_to_be_secrets_are_left_alone() -> None:
    # A three-character "secret" would turn every such word of the log into ***.
    assert secret_values({"API_KEY": "abc"}) == set()
    assert secret_values({"API_KEY": "abcd"}) == {"abcd"}
    assert MIN_SECRET == 4


@pytest.mark.usefixtures("restore_logging")
def test_a_library_warning_goes_out_through_the_redactor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Libraries warn with `warnings.warn`, which writes to stderr past every log handler.
    stream = io.StringIO()
    setup_logging("INFO", "console", env={"TELEGRAM_BOT_TOKEN": "123:warned-token"}, stream=stream)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("the token 123:warned-token looks odd", UserWarning, stacklevel=1)
    assert "warned-token" not in stream.getvalue() + capsys.readouterr().err
    assert "the token *** looks odd" in stream.getvalue()


def test_what_the_cli_prints_goes_through_the_redactor() -> None:
    inner = io.StringIO()
    out = RedactedStream(inner, redactor({"TELEGRAM_BOT_TOKEN": "123:ABC-secret"}))
    print("token 123:ABC-secret was rejected", file=out)
    assert inner.getvalue() == "token *** was rejected\n"


@pytest.mark.anyio
async def test_a_start_up_failure_does_not_print_the_bot_token(tmp_path: Path) -> None:
    token = "999:rejected-token-VALUE"
    async with FakeTelegram() as telegram:
        env = cli_env(
            tmp_path,
            TELEGRAM_BOT_TOKEN=token,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="42",
            PI_BRIDGE_SANDBOX="off",
        )
        done = await run_cli(tmp_path, env, "run")
    printed = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 1, printed
    assert "pi-bridge: telegram:" in printed  # it does say what failed
    assert "rejected-token-VALUE" not in printed

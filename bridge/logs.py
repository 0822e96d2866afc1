"""Logging setup: one line per record on stderr, as JSON or for a human, never a secret.

`PI_BRIDGE_LOG_FORMAT` (`json` | `console`) and `PI_BRIDGE_LOG_LEVEL` pick the
shape and the threshold (via `bridge.app.config`). Secret values found in the
environment (bot tokens, signing secrets, provider keys, a store password) are
replaced by `***` in every record, including tracebacks: HTTP client libraries
log request URLs, and the Telegram Bot API puts the token in the URL.
Message bodies are the call sites' business: they log them at DEBUG only.

Values are hidden before a record is shaped: a JSON line is built from redacted
fields, so a secret holding `"` or `\\` (which `json.dumps` would escape past
recognition) is hidden too. What the CLI prints (start-up errors, `check`) goes
through the same `Redactor` (`redactor()`), and so do Python warnings (logged).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Protocol, TextIO
from urllib.parse import parse_qsl, unquote, urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|_KEY)$", re.IGNORECASE)
# Shorter values would redact ordinary words and numbers all over the log; a secret of
# 1-3 characters is no secret anyway (guessed in a moment).
MIN_SECRET = 4
# Libraries that log every request at INFO (with URLs that carry the Telegram token).
_CHATTY = ("httpx", "httpcore", "aiohttp.access", "slack_bolt", "slack_sdk", "telegram")


def secret_values(env: Mapping[str, str]) -> set[str]:
    """Values worth hiding: secret-looking names, and passwords inside store URLs."""
    found = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET}
    return found | _store_passwords(env.get("PI_BRIDGE_STORE", ""))


def _store_passwords(url: str) -> set[str]:
    """A store URL's password: in its user part, or as a query parameter (redis-py
    takes `?password=`), raw and percent-decoded."""
    if "://" not in url:
        return set()
    try:
        parts = urlsplit(url)
        raw = {parts.netloc.rpartition("@")[0].partition(":")[2]} if "@" in parts.netloc else set()
        raw |= {v for k, v in parse_qsl(parts.query) if _SECRET_NAME.search(k) or k == "password"}
    except ValueError:
        return set()
    values = {v for v in raw if v} | {unquote(v) for v in raw if v}
    return {v for v in values if len(v) >= MIN_SECRET}


def redactor(env: Mapping[str, str] | None = None) -> Redactor:
    """The redactor for this process's secrets (the environment's by default)."""
    return Redactor(secret_values(os.environ if env is None else env))


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is hidden whole.
        ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        return self._pattern.sub("***", text) if self._pattern else text


class TextOut(Protocol):
    """Where the CLI writes: a terminal stream, or one that redacts on the way."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class RedactedStream:
    """A text stream whose writes go out redacted: what the CLI prints."""

    def __init__(self, inner: TextIO, redact: Redactor) -> None:
        self.inner, self.redact = inner, redact

    def write(self, text: str) -> int:
        return self.inner.write(self.redact(text))

    def flush(self) -> None:
        self.inner.flush()


class RedactSecrets(logging.Filter):
    """Rewrites a record's message (arguments merged in) with the secrets hidden."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line, built from redacted fields (see the module docstring)."""

    def __init__(self, redact: Redactor | None = None) -> None:
        super().__init__()
        self.redact = redact or Redactor(())

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": self.redact(record.getMessage()),
        }
        if record.exc_info:
            entry["exc"] = self.redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class _Redacting(logging.Formatter):
    """Wraps a formatter: tracebacks are formatted after the filters ran."""

    def __init__(self, inner: logging.Formatter, redact: Redactor) -> None:
        super().__init__()
        self.inner, self.redact = inner, redact

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(self.inner.format(record))


def setup_logging(
    level: str = "INFO",
    fmt: str = "console",
    env: Mapping[str, str] | None = None,
    stream: TextIO | None = None,
) -> None:
    """Replace the root logger's handlers with one redacting stderr handler."""
    redact = redactor(env)
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(redact))
    else:
        line = logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
        handler.setFormatter(_Redacting(line, redact))
    handler.addFilter(RedactSecrets(redact))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # `warnings.warn` (libraries' deprecations and misuse notes) writes to stderr on its
    # own, past this handler and its redactor: routed through the log instead.
    logging.captureWarnings(True)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))

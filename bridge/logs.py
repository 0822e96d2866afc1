"""Logging setup: one line per record on stderr, as JSON or for a human, never a secret.

`PI_BRIDGE_LOG_FORMAT` (`json` | `console`) and `PI_BRIDGE_LOG_LEVEL` pick the
shape and the threshold (via `bridge.config`). Secret values found in the
environment (bot tokens, signing secrets, provider keys, a store password) are
replaced by `***` in every record, including tracebacks: HTTP client libraries
log request URLs, and the Telegram Bot API puts the token in the URL.
Message bodies are the call sites' business: they log them at DEBUG only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|_KEY)$", re.IGNORECASE)
MIN_SECRET = 8  # shorter values would redact ordinary words
# Libraries that log every request at INFO (with URLs that carry the Telegram token).
_CHATTY = ("httpx", "httpcore", "aiohttp.access", "slack_bolt", "slack_sdk", "telegram")


def secret_values(env: Mapping[str, str]) -> set[str]:
    """Values worth hiding: secret-looking names, and passwords inside store URLs."""
    found = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET}
    store = env.get("PI_BRIDGE_STORE", "")
    if "://" in store:
        try:
            password = urlsplit(store).password
        except ValueError:
            password = None
        if password and len(password) >= MIN_SECRET:
            found.add(password)
    return found


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is hidden whole.
        ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        return self._pattern.sub("***", text) if self._pattern else text


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
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
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
    redact = Redactor(secret_values(os.environ if env is None else env))
    handler = logging.StreamHandler(stream or sys.stderr)
    inner = (
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    )
    handler.setFormatter(_Redacting(inner, redact))
    handler.addFilter(RedactSecrets(redact))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))

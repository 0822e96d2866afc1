"""A throwaway `redis-server` on 127.0.0.1 for the redis store tests.

Each server lives in its own temp dir with persistence off (`--save ""`,
`--appendonly no`), listens on a free port, and is stopped by its own pid; nothing
else is touched. redis-server comes from the Debian package of that name, which
deploy/dev-setup.sh installs.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from typing import TYPE_CHECKING

import redis.asyncio as aioredis

from tests.support.loopback import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path
    from types import TracebackType

INSTALL_HINT = (
    "redis-server is not installed (the redis store tests need a real one): run "
    "`bash deploy/dev-setup.sh`, or `sudo apt-get install -y --no-install-recommends "
    "redis-server` on Debian/Ubuntu"
)
START_ATTEMPTS = 3  # a free port can be taken by someone else before redis binds it
READY_TIMEOUT = 10.0  # seconds


def redis_server_bin() -> str | None:
    """The redis-server executable on PATH, if any."""
    return shutil.which("redis-server")


def answers_ping(port: int) -> bool:
    """True when a redis server on `port` replies to an inline PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.asynccontextmanager
async def redis_client(url: str) -> AsyncIterator[aioredis.Redis]:
    """A client of the server at `url` (strings decoded), closed at the end."""
    client = aioredis.from_url(url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


class RedisServer:
    """`with RedisServer(workdir) as server:` a running server at `server.url`."""

    def __init__(
        self, workdir: Path, *, executable: str | None = None, persist: bool = False
    ) -> None:
        self._workdir = workdir
        self._persist = persist  # an append-only file, so a restart keeps the data
        self._executable = executable or redis_server_bin()
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._port}/0"

    def start(self) -> None:
        if self._executable is None:
            raise RuntimeError(INSTALL_HINT)
        self._workdir.mkdir(parents=True, exist_ok=True)
        for _ in range(START_ATTEMPTS):
            if self._start_once(free_port()):
                return
        raise RuntimeError(f"redis-server did not start; its output:\n{self._output()}")

    def _start_once(self, port: int) -> bool:
        assert self._executable is not None
        argv = [
            self._executable,
            *("--port", str(port), "--bind", "127.0.0.1"),
            *("--save", ""),
            *(("--appendonly", "yes", "--appendfsync", "always") if self._persist else ()),
            *(("--appendonly", "no") if not self._persist else ()),
            *("--dir", str(self._workdir), "--daemonize", "no"),
        ]
        with (self._workdir / "redis.log").open("ab") as log:
            process = subprocess.Popen(
                argv, cwd=self._workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        self._process, self._port = process, port
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False  # e.g. the port was taken after all: try another
            if answers_ping(port):
                return True
            time.sleep(0.02)
        self.stop()
        return False

    def restart(self) -> None:
        """Stop, then start again on the same port (with `persist`, the same data)."""
        port = self._port
        self.stop()
        if not self._start_once(port):
            raise RuntimeError(f"redis-server did not start again; its output:\n{self._output()}")

    def start_again(self) -> None:
        """Start again on the same port after `stop` (with `persist`, the same data)."""
        if not self._start_once(self._port):
            raise RuntimeError(f"redis-server did not start again; its output:\n{self._output()}")

    def stop(self) -> None:
        """Terminate our server (by its pid) and reap it; a no-op when not running."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _output(self) -> str:
        log = self._workdir / "redis.log"
        return log.read_text(errors="replace")[-4000:] if log.exists() else "(no output)"

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

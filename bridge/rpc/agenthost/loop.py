"""The host's loop: the agent's pipes, the listening socket, at most one bridge."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING

if __package__:  # imported as bridge.rpc.agenthost.loop (tests, type checks)
    from bridge.rpc.agenthost.buffer import Buffer, kind
    from bridge.rpc.agenthost.lines import Lines
else:  # run as the folder, isolated: its modules are top-level there
    from buffer import Buffer, kind  # type: ignore[import-not-found,no-redef]
    from lines import Lines  # type: ignore[import-not-found,no-redef]

if TYPE_CHECKING:
    from bridge.rpc.agenthost.settings import Args

VERSION = 1
CHUNK = 1 << 16
STDERR_TAIL = 8192
CLIENT_BACKLOG = 4 << 20  # unsent bytes to a bridge before the agent's output waits
STDIN_BACKLOG = 64 << 20
STOP_GRACE = 3.0  # after closing stdin, before the keeper is told to end the agent
TICK = 0.5
LINGER = 0.001  # seconds: what the bridge waits longer for a record, at most
_OPENS_DIALOG = b"extension_ui_request"
_DIALOG_METHODS = {"select", "confirm", "input", "editor"}


class Host:
    """The loop: the agent's pipes, the listening socket, at most one bridge."""

    def __init__(self, args: Args) -> None:
        self.args = args
        self.buffer = Buffer(args.spill, args.memory_cap, args.total_cap)
        self.selector = selectors.DefaultSelector()
        self.seq = 0
        self.client: socket.socket | None = None
        self.client_in = bytearray()
        self.client_out = bytearray()
        self.client_events = 0  # what the selector watches the bridge's socket for
        self.reading = False  # whether the agent's stdout is watched
        self.bound = 0  # the inode of our socket: a successor's at the same path is not ours
        self.greeted = False
        self.cursor = 0  # the last seq queued to the bridge
        self.stdin_out = bytearray()
        self.lines = Lines()
        self.stderr_tail = bytearray()
        self.open_pipes = 2  # the agent's stdout and stderr
        self.exit_code: int | None = None
        self.exit_sent = False
        self.alone_since: float | None = time.monotonic()  # no bridge since then
        self.dialogs: set[str] = set()
        self.run_open = False
        self.expiring_since: float | None = None
        self.stop_at: float | None = None  # when the keeper gets SIGTERM
        self.stopped = False
        self.keeper = 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    # --- setup ---------------------------------------------------------------------

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.args.socket)
        old, here = os.umask(0o177), os.getcwd()  # born 0600: nobody else may ever connect
        try:
            # From inside its folder: a unix socket's path must fit in 108 bytes.
            os.chdir(os.path.dirname(os.path.abspath(self.args.socket)))
            self.listener.bind(os.path.basename(self.args.socket))
            self.bound = os.stat(os.path.basename(self.args.socket)).st_ino
        finally:
            os.umask(old)
            os.chdir(here)
        self.listener.listen(4)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, "listen")
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        # The keeper lives beside this folder, in bridge/rpc/.
        here = os.path.dirname(os.path.abspath(__file__))
        keeper = os.path.join(os.path.dirname(here), "reaper.py")
        argv = [sys.executable, "-I", "-S", keeper, str(os.getpid()), *self.args.command]
        pid = os.fork()
        if pid == 0:  # the keeper: the pipes as its stdio, nothing else of ours
            try:
                os.dup2(stdin_r, 0)
                os.dup2(stdout_w, 1)
                os.dup2(stderr_w, 2)
                os.closerange(3, 1 << 16)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.execv(sys.executable, argv)
            finally:
                os._exit(127)
        self.keeper = pid
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        self.stdin, self.stdout, self.stderr = stdin_w, stdout_r, stderr_r
        for fd in (stdin_w, stdout_r, stderr_r):
            os.set_blocking(fd, False)
        self.selector.register(stdout_r, selectors.EVENT_READ, "stdout")
        self.reading = True  # the agent's stdout is watched (not while a bridge lags)
        self.selector.register(stderr_r, selectors.EVENT_READ, "stderr")

    # --- the loop ------------------------------------------------------------------

    def run(self) -> int:
        while not self._finished():
            for key, mask in self.selector.select(TICK):
                getattr(self, f"_on_{key.data}")(mask)
            self._reap()
            self._fill()
            self._timers(time.monotonic())
        self._close_client()
        self.buffer.close()
        with contextlib.suppress(OSError):
            if os.stat(self.args.socket).st_ino == self.bound:
                os.unlink(self.args.socket)
        return 0  # the agent's own exit went to the bridge (`exit <code>`)

    def _finished(self) -> bool:
        """The agent is gone and its end was told to a bridge, or nobody came for it."""
        if self.exit_code is None:
            return False
        if self.exit_sent and not self.client_out:
            return True
        alone = self.alone_since
        if alone is None:
            return False
        # Ended on purpose: nobody is owed its end. Else a bridge may yet come for it.
        return self.stopped or time.monotonic() - alone > self.args.detach_timeout

    def _on_listen(self, _mask: int) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        self._close_client()  # the newer bridge wins: an older one may hang
        conn.setblocking(False)
        self.client, self.greeted, self.alone_since = conn, False, None
        self.expiring_since = None
        self.selector.register(conn, selectors.EVENT_READ, "client")
        self.client_events = selectors.EVENT_READ

    def _on_client(self, mask: int) -> None:
        client = self.client
        assert client is not None
        if mask & selectors.EVENT_READ:
            try:
                data = client.recv(CHUNK)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._close_client()
                return
            if data:
                self.client_in += data
                self._commands()
        self._want_client_writes()  # the socket may take more now (EVENT_WRITE)

    def _commands(self) -> None:
        while self.client is not None:
            end = self.client_in.find(b"\n")
            if end < 0:
                return
            line = bytes(self.client_in[:end])
            del self.client_in[: end + 1]
            self._command(line)

    def _command(self, line: bytes) -> None:
        verb, _, rest = line.partition(b" ")
        if not self.greeted:
            parts = rest.split()
            if verb != b"pi-host" or len(parts) != 2 or not parts[1].lstrip(b"-").isdigit():
                self._close_client()
                return
            self.greeted = True
            self.cursor = min(max(int(parts[1]), 0), self.seq)
            oldest = self.buffer.oldest() or self.seq + 1
            hello = f"pi-host {VERSION} {os.getpid()} {self.keeper} {oldest} {self.seq + 1}\n"
            self.client_out += hello.encode()
            return
        if verb == b"w":
            self._to_agent(rest)
        elif verb == b"ack" and rest.isdigit():
            self.buffer.ack(int(rest))
        elif verb == b"stop":
            self.stop()
        elif verb == b"bye":
            self._close_client()

    def _to_agent(self, record: bytes) -> None:
        if self.stopped or self.stdin < 0:
            return
        if record.startswith(b'{"type":"extension_ui_response"'):
            with contextlib.suppress(ValueError, AttributeError):
                self.dialogs.discard(str(json.loads(record).get("id")))
        if len(self.stdin_out) + len(record) > STDIN_BACKLOG:
            return  # the agent reads nothing: the bridge's request times out and says so
        self.stdin_out += record + b"\n"
        self._on_stdin(selectors.EVENT_WRITE)

    def _on_stdin(self, _mask: int) -> None:
        if self.stdin < 0:
            return
        try:
            written = os.write(self.stdin, self.stdin_out) if self.stdin_out else 0
        except BlockingIOError:
            written = 0
        except OSError:  # the agent is gone; its exit says why
            self.stdin_out.clear()
            written = 0
        del self.stdin_out[:written]
        events = selectors.EVENT_WRITE if self.stdin_out else 0
        with contextlib.suppress(KeyError):
            self.selector.unregister(self.stdin)
        if events:
            self.selector.register(self.stdin, events, "stdin")

    def _on_stdout(self, _mask: int) -> None:
        chunk = b""
        try:
            chunk = os.read(self.stdout, CHUNK)
            if 0 < len(chunk) < CHUNK // 4 and self.client is not None:
                # A trickle: let more of it come, then handle it in one turn, so a fast
                # stream costs a few wake-ups and sends a millisecond, not one a record.
                time.sleep(LINGER)
                chunk += os.read(self.stdout, CHUNK)
        except BlockingIOError:
            if not chunk:
                return
        if not chunk:
            self.selector.unregister(self.stdout)
            self.reading = False
            os.close(self.stdout)
            self.stdout, self.open_pipes = -1, self.open_pipes - 1
            return
        for record in self.lines.feed(chunk):
            self._record(record)
        self._pace_stdout()

    def _record(self, record: bytes) -> None:
        self.seq += 1
        kind_of = kind(record)
        self.buffer.add(self.seq, record, kind_of)
        if kind_of == b"agent_start":
            self.run_open = True
        elif kind_of == b"agent_end":
            self.run_open = False
        elif kind_of == _OPENS_DIALOG:
            with contextlib.suppress(ValueError, AttributeError):
                request = json.loads(record)
                if request.get("method") in _DIALOG_METHODS:
                    self.dialogs.add(str(request.get("id")))
        if self.client is not None and self.greeted and self.cursor == self.seq - 1:
            self.client_out += b"%d %s\n" % (self.seq, record)
            self.cursor = self.seq

    def _pace_stdout(self) -> None:
        """A bridge that reads slowly slows the agent, as a pipe would; with none, the
        buffer's caps bound what is kept."""
        if self.stdout < 0:
            return
        behind = self.client is not None and len(self.client_out) > CLIENT_BACKLOG
        if behind and self.reading:
            self.selector.unregister(self.stdout)
            self.reading = False
        elif not behind and not self.reading:
            self.selector.register(self.stdout, selectors.EVENT_READ, "stdout")
            self.reading = True

    def _on_stderr(self, _mask: int) -> None:
        try:
            chunk = os.read(self.stderr, CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.selector.unregister(self.stderr)
            os.close(self.stderr)
            self.stderr, self.open_pipes = -1, self.open_pipes - 1
            return
        self.stderr_tail += chunk
        del self.stderr_tail[:-STDERR_TAIL]

    def _fill(self) -> None:
        """Queue what the bridge has not had yet (a replay, or the catch-up after it
        fell behind), a batch at a time, and the agent's end once all is sent."""
        if self.client is None or not self.greeted:
            return
        if self.cursor < self.seq and len(self.client_out) < CLIENT_BACKLOG // 2:
            batch = []
            size = 0
            for number, record in self.buffer.after(self.cursor):
                batch.append(b"%d %s\n" % (number, record))
                size += len(record)
                self.cursor = number
                if size > CLIENT_BACKLOG:
                    break
            else:
                self.cursor = self.seq  # the rest were dropped
            self.client_out += b"".join(batch)
        if self.exit_code is not None and not self.exit_sent and self.cursor == self.seq:
            tail = json.dumps(self.stderr_tail.decode("utf-8", "replace"))
            self.client_out += f"exit {self.exit_code} {tail}\n".encode()
            self.exit_sent = True
        self._want_client_writes()
        self._pace_stdout()

    def _want_client_writes(self) -> None:
        """Send what can go at once; wait for the socket to take more only if it must
        (one `select` turn and no selector change per record in the common case)."""
        client = self.client
        if client is None:
            return
        if self.client_out:
            try:
                del self.client_out[: client.send(self.client_out)]
            except BlockingIOError:
                pass
            except OSError:
                self._close_client()
                return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.client_out else 0)
        if events != self.client_events:
            self.client_events = events
            self.selector.modify(client, events, "client")

    def _close_client(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(client)
        client.close()
        self.client_in.clear()
        self.client_out.clear()
        self.exit_sent = False  # the next bridge must hear it
        self.alone_since = time.monotonic()
        self._pace_stdout()

    # --- ending --------------------------------------------------------------------

    def _reap(self) -> None:
        if self.exit_code is not None or self.open_pipes:
            return
        with contextlib.suppress(ChildProcessError):
            pid, status = os.waitpid(self.keeper, os.WNOHANG)
            if pid == 0:
                return
            self.exit_code = os.waitstatus_to_exitcode(status)
        if self.exit_code is None:
            self.exit_code = -1
        self._close_stdin()

    def _timers(self, now: float) -> None:
        if self.stop_at is not None and now >= self.stop_at and self.exit_code is None:
            self.stop_at = None
            with contextlib.suppress(OSError):
                os.kill(self.keeper, signal.SIGTERM)  # it ends the agent (SIGKILL in 2 s)
        alone = self.alone_since
        if alone is None or self.stopped or now - alone < self.args.detach_timeout:
            return
        if self.expiring_since is None:
            self.expiring_since = now
            for request_id in sorted(self.dialogs):  # nobody is there to answer them
                cancel = {"type": "extension_ui_response", "id": request_id, "cancelled": True}
                self._to_agent(json.dumps(cancel, separators=(",", ":")).encode())
        if not self.run_open or now - self.expiring_since > self.args.run_limit:
            self.stop()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._close_stdin()  # pi ends on stdin EOF
        self.stop_at = time.monotonic() + STOP_GRACE

    def _close_stdin(self) -> None:
        if self.stdin >= 0:
            with contextlib.suppress(KeyError):
                self.selector.unregister(self.stdin)
            os.close(self.stdin)
            self.stdin = -1
            self.stdin_out.clear()

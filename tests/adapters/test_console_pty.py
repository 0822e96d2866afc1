"""The console in a real terminal: `pi-bridge console` as a process on a pseudo-terminal,
the real agent against the fake LLM, its output read from the pty and played onto a
small screen model that keeps which cells are bold. What the person sees is the
agent's Markdown rendered (bold as bold, a code block without its fence), not its
source."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.cli import cli_env, command, kill_agents
from tests.support.fake_llm import Reply

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

ROWS, COLUMNS = 40, 100
WAIT = 90.0
ANSWER = "Here is **bold** text and `code`.\n\n```python\nprint('fenced')\n```\n\n- one\n- two\n"


class Screen:
    """What a VT100-like terminal shows: text, CR, LF, cursor up and down, erase line,
    and, of the SGR codes, bold on and off; other control sequences change nothing."""

    TOKEN = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07]*\x07|\r|\n|[^\x1b\r\n]+")

    def __init__(self) -> None:
        self.lines: list[list[tuple[str, bool]]] = [[]]
        self.row = self.col = 0
        self.bold = False

    def feed(self, data: str) -> None:
        for match in self.TOKEN.finditer(data):
            token, params, final = match.group(0), match.group(1) or "", match.group(2) or ""
            if not token.startswith(("\x1b", "\r", "\n")):
                self._put(token)
            elif token == "\n":
                self._move(self.row + 1)
                self.col = 0
            elif token == "\r":
                self.col = 0
            elif final == "m":
                self._sgr(params)
            elif final == "K":
                self.lines[self.row] = []
            elif final in ("A", "B"):
                step = int(params or 1)
                self._move(max(0, self.row - step) if final == "A" else self.row + step)

    def _sgr(self, params: str) -> None:
        codes = [int(c) for c in params.split(";") if c.isdigit()] or [0]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code in (38, 48):  # a colour: 5;n or 2;r;g;b follows
                i += 3 if i + 1 < len(codes) and codes[i + 1] == 5 else 5
                continue
            if code == 1:
                self.bold = True
            elif code in (0, 22):
                self.bold = False
            i += 1

    def _move(self, row: int) -> None:
        self.row = row
        self.lines += [[] for _ in range(row + 1 - len(self.lines))]

    def _put(self, text: str) -> None:
        line = self.lines[self.row]
        line += [(" ", False)] * (self.col - len(line))
        for ch in text:
            if self.col < len(line):
                line[self.col] = (ch, self.bold)
            else:
                line.append((ch, self.bold))
            self.col += 1

    def text(self) -> str:
        return "\n".join("".join(c for c, _ in line).rstrip() for line in self.lines)

    def bold_words(self) -> set[str]:
        words: set[str] = set()
        for line in self.lines:
            shown = "".join("\0" if not b else c for c, b in line)
            words |= {w for w in re.split(r"[\0\s]+", shown) if w}
        return words


def console_env(tmp_path: Path, home: AgentHome) -> dict[str, str]:
    env = cli_env(tmp_path, home, TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(ROWS))
    env.pop("NO_COLOR", None)
    return env


@contextlib.contextmanager
def on_a_pty(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    os.set_blocking(master, False)
    with (tmp_path / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            command("console"),
            stdin=slave,
            stdout=slave,
            stderr=stderr,
            cwd=tmp_path,
            env=env,
            start_new_session=True,
        )
    os.close(slave)
    try:
        yield process, master
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        os.close(master)
        kill_agents(tmp_path / "data")


class Reader:
    def __init__(self, master: int) -> None:
        self.master = master
        self.raw = b""

    def drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self.raw += chunk

    async def until(self, text: str, within: float = WAIT) -> None:
        deadline = time.monotonic() + within
        while text.encode() not in self.raw:
            assert time.monotonic() < deadline, f"{text!r} never shown: {self.raw[-2000:]!r}"
            await anyio.sleep(0.05)
            self.drain()


async def test_the_console_renders_the_agents_markdown_in_a_real_terminal(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("markdown please", Reply(text=ANSWER))
    with on_a_pty(tmp_path, console_env(tmp_path, agent_home)) as (process, master):
        out = Reader(master)
        await out.until("Type a message")
        os.write(master, b"markdown please\n")
        await out.until("fenced")
        await out.until("done")  # the run's status, once the answer is final
        os.write(master, b"\x04")  # Ctrl-D: end of input, the console exits
        deadline = time.monotonic() + WAIT
        while process.poll() is None and time.monotonic() < deadline:
            await anyio.sleep(0.1)
            out.drain()
        out.drain()
        assert process.returncode == 0, (tmp_path / "stderr.log").read_text()
    assert b"\x1b[2K" in out.raw  # the live region was drawn, and erased, meanwhile
    screen = Screen()
    screen.feed(out.raw.decode(errors="replace"))
    shown = screen.text()
    assert "Here is bold text and code." in shown, shown
    assert "print('fenced')" in shown
    assert "**" not in shown
    assert "`" not in shown  # no code fence, no inline code marks
    assert re.search(r"^\s*•\s+one$", shown, re.MULTILINE), shown  # a list, as a list
    assert "bold" in screen.bold_words()
    assert "Here" not in screen.bold_words()

"""Record transcripts of a real agent against the fake LLM, into the project's fixtures.

    .venv/bin/python -m tests.support.record_transcripts [VERSION] [FOLDER]

(default: 1.5.2 into tests/fixtures/transcripts/p152). Each scenario runs one agent in
a throwaway home, offline, and writes the same files as the shared recordings
(../shared/protocol/README.md): `NAME.stdout.jsonl` (the bytes the agent wrote),
`NAME.stdin.jsonl` (the bytes written to it), `NAME.timeline.txt` (both directions
with times, then how the agent was closed) and `NAME.summary.txt` (the event
sequence in short, per process). The throwaway paths are rewritten to `/srv/rec`, so a
recording names nothing of the machine it was made on; ids and times differ from
run to run, the shapes and the order do not.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.agents import AgentHome, agents_dir, extension_path, make_agent_home
from tests.support.fake_llm import FakeLLM, Reply, ToolCall
from tests.support.paths import TESTS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

FIXTURES = TESTS / "fixtures" / "transcripts"
DEFAULT_VERSION, DEFAULT_FOLDER = "1.5.2", "p152"
NEUTRAL = "/srv/rec"
WAIT = 30.0


@dataclass
class Session:
    """One agent process under recording."""

    process: asyncio.subprocess.Process
    started: float
    stdout: bytearray = field(default_factory=bytearray)
    stdin: bytearray = field(default_factory=bytearray)
    timeline: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    closed_by: str = "unknown"

    def now(self) -> float:
        return time.monotonic() - self.started

    async def send(self, command: dict[str, Any]) -> None:
        line = json.dumps(command, ensure_ascii=True)
        data = (line + "\n").encode()
        self.stdin += data
        self.timeline.append(f"{self.now():8.3f}  > {line}")
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        while chunk := await self.process.stdout.read(65536):
            self.stdout += chunk
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    self._received(line)
        if buffer.strip():
            self.stdout += b"\n"  # the recording's last record ends like the others
            self._received(buffer)

    def _received(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            record = {"type": "<not json>"}
        self.records.append(record if isinstance(record, dict) else {"type": "<not object>"})
        self.timeline.append(f"{self.now():8.3f} <  {line[:300].decode('utf-8', 'replace')}")
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait(self, where: Callable[[dict[str, Any]], bool], after: int = 0) -> int:
        """The index of the first record from `after` on that matches."""
        async with asyncio.timeout(WAIT):
            seen = after
            while True:
                for index in range(seen, len(self.records)):
                    if where(self.records[index]):
                        return index
                seen = len(self.records)
                await self.changed.wait()

    async def wait_type(self, kind: str, after: int = 0) -> int:
        return await self.wait(lambda r: r.get("type") == kind, after)

    async def answer(self, command: str, after: int = 0) -> dict[str, Any]:
        index = await self.wait(
            lambda r: r.get("type") == "response" and r.get("command") == command, after
        )
        return self.records[index]


Scenario = tuple[str, "Callable[[FakeLLM], None]", "Callable[[Session], Awaitable[None]]", str]


def typed(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r.get("type") == kind


# --- the scenarios ------------------------------------------------------------------------


def _plain(llm: FakeLLM) -> None:
    llm.add("hello", Reply(text="Hello from the fake model, nice to meet you."))


async def a_plain(s: Session) -> None:
    await s.send({"type": "get_state", "id": "get_state-1"})
    await s.answer("get_state")
    await s.send({"type": "prompt", "message": "hello there", "id": "req-1"})
    await s.wait_type("agent_settled")


def _bash(llm: FakeLLM) -> None:
    llm.add(
        "list",
        Reply(text="Listing.", tool_calls=[ToolCall("bash", {"command": "sleep 0.3; echo hi"})]),
        Reply(text="Listed."),
    )


async def b_bash(s: Session) -> None:
    await s.send({"type": "prompt", "message": "please list", "id": "req-1"})
    await s.wait_type("agent_settled")


def _gate(llm: FakeLLM) -> None:
    llm.add("remove", Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build"})]))


async def c1_perm_yes(s: Session) -> None:
    await s.send({"type": "prompt", "message": "remove the build", "id": "req-1"})
    request = s.records[await s.wait(lambda r: r.get("method") == "select")]
    await s.send({"type": "extension_ui_response", "id": request["id"], "value": "Yes"})
    await s.wait_type("agent_settled")


async def c6_command(s: Session) -> None:
    # An extension command: "handled", no run of its own; then a plain prompt.
    await s.send({"type": "prompt", "message": "/rpc-prefill", "id": "req-1"})
    await s.answer("prompt")
    await s.send({"type": "prompt", "message": "hello after the command", "id": "req-2"})
    await s.wait_type("agent_settled")


def _slow_tool(llm: FakeLLM) -> None:
    llm.add("slow", Reply(tool_calls=[ToolCall("bash", {"command": "sleep 1; echo slept"})]))
    llm.add("steered", Reply(text="Taking the steer into account."))
    llm.add("after", Reply(text="And the follow-up."))


async def d1_steer_tool(s: Session) -> None:
    await s.send({"type": "prompt", "message": "slow tool please", "id": "req-1"})
    await s.wait_type("tool_execution_start")
    await s.send({"type": "steer", "message": "steered: stop soon", "id": "req-2"})
    await s.answer("steer")
    await s.wait_type("agent_settled")


async def e1_follow_up(s: Session) -> None:
    await s.send({"type": "prompt", "message": "slow tool please", "id": "req-1"})
    await s.wait_type("tool_execution_start")
    await s.send({"type": "follow_up", "message": "after that, one more", "id": "req-2"})
    await s.answer("follow_up")
    await s.wait_type("agent_settled")


async def e2_idle_queue(s: Session) -> None:
    # Sent while idle: accepted ("queued"), starts nothing; the next prompt takes them.
    await s.send({"type": "steer", "message": "steered while idle", "id": "req-1"})
    await s.answer("steer")
    await s.send({"type": "follow_up", "message": "after while idle", "id": "req-2"})
    await s.answer("follow_up")
    await s.send({"type": "get_state", "id": "req-3"})
    await s.answer("get_state")
    await s.send({"type": "clear_queue", "id": "req-4"})
    await s.answer("clear_queue")


def _slow_text(llm: FakeLLM) -> None:
    words = " ".join(f"word{i}" for i in range(60))
    llm.add("story", Reply(text=words, delay=0.05))


async def f1_abort_text(s: Session) -> None:
    await s.send({"type": "prompt", "message": "tell a story", "id": "req-1"})
    first = await s.wait(lambda r: r.get("assistantMessageEvent", {}).get("type") == "text_delta")
    await s.wait(
        lambda r: r.get("assistantMessageEvent", {}).get("type") == "text_delta", first + 3
    )
    await s.send({"type": "abort", "id": "req-2"})
    await s.wait_type("agent_settled")
    await s.answer("abort")


async def f2_abort_tool(s: Session) -> None:
    await s.send({"type": "prompt", "message": "slow tool please", "id": "req-1"})
    await s.wait_type("tool_execution_start")
    await s.send({"type": "abort", "id": "req-2"})
    await s.wait_type("agent_settled")
    await s.answer("abort")


async def g_state(s: Session) -> None:
    await s.send({"type": "get_session_stats", "id": "req-1"})
    await s.answer("get_session_stats")
    await s.send({"type": "prompt", "message": "hello there", "id": "req-2"})
    await s.wait_type("agent_settled")
    await s.send({"type": "get_session_stats", "id": "req-3"})
    await s.wait(lambda r: r.get("id") == "req-3")
    await s.send({"type": "get_state", "id": "req-4"})
    await s.answer("get_state")


async def j_bad_input(s: Session) -> None:
    s.process.stdin.write(b"this is not json\n")  # type: ignore[union-attr]
    s.stdin += b"this is not json\n"
    s.timeline.append(f"{s.now():8.3f}  > this is not json")
    await s.answer("parse")
    await s.send({"type": "no_such_command", "id": "req-1"})
    await s.wait(lambda r: r.get("id") == "req-1")
    await s.send({"type": "prompt", "id": "req-2"})
    await s.wait(lambda r: r.get("id") == "req-2")


async def k_term_run(s: Session) -> None:
    # Ended as the bridge ends an agent whose run it stops: stdin closed and SIGTERM
    # together, mid-answer. 1.5 finishes writing the session before it exits.
    await s.send({"type": "prompt", "message": "tell a story", "id": "req-1"})
    first = await s.wait(lambda r: r.get("assistantMessageEvent", {}).get("type") == "text_delta")
    await s.wait(
        lambda r: r.get("assistantMessageEvent", {}).get("type") == "text_delta", first + 3
    )
    s.closed_by = "term"


def _story_and_tool(llm: FakeLLM) -> None:
    _slow_text(llm)
    _slow_tool(llm)
    _plain(llm)


SCENARIOS: list[Scenario] = [
    ("a_plain", _plain, a_plain, ""),
    ("b_bash", _bash, b_bash, ""),
    ("c1_perm_yes", _gate, c1_perm_yes, "permission-gate.ts"),
    ("c6_command", _plain, c6_command, "rpc-demo.ts"),
    ("d1_steer_tool", _slow_tool, d1_steer_tool, ""),
    ("e1_follow_up", _slow_tool, e1_follow_up, ""),
    ("e2_idle_queue", _plain, e2_idle_queue, ""),
    ("f1_abort_text", _slow_text, f1_abort_text, ""),
    ("f2_abort_tool", _slow_tool, f2_abort_tool, ""),
    ("g_state", _plain, g_state, ""),
    ("j_bad_input", _plain, j_bad_input, ""),
    ("k_term_run", _story_and_tool, k_term_run, ""),
]


# --- running one ----------------------------------------------------------------------------


async def record(
    version: str, name: str, script: Callable[[FakeLLM], None], body: Any, extension: str
) -> tuple[Session, list[str], Path]:
    root = Path(tempfile.mkdtemp(prefix="rec-"))
    try:
        async with FakeLLM() as llm:
            script(llm)
            home: AgentHome = make_agent_home(root / "home-root", llm.base_url)
            workspace = root / "ws"
            workspace.mkdir()
            sessions = root / "sessions"
            extra = ["--session-dir", str(sessions)]
            if extension:
                extra += ["-e", str(extension_path(version, extension))]
            argv = home.argv(version, *extra)
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=workspace,
                env=home.env(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            session = Session(process, time.monotonic())
            reader = asyncio.create_task(session.read())
            try:
                await body(session)
                await _close(session)
                await asyncio.wait_for(reader, WAIT)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            written = sorted(p.name for p in sessions.glob("*.jsonl")) if sessions.is_dir() else []
            header = [f"# argv: pi-{version} --mode rpc --provider fake --model fake-model"]
            header += [f"# extension: {extension}"] if extension else []
            header += [f"# session files written: {len(written)}"]
            return session, header, root
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


async def _close(s: Session) -> None:
    assert s.process.stdin is not None
    if s.closed_by == "term":
        s.process.stdin.close()
        s.process.send_signal(signal.SIGTERM)
    else:
        s.closed_by = "stdin"
        s.process.stdin.close()
    code = await asyncio.wait_for(s.process.wait(), WAIT)
    s.timeline.append(f"{s.now():8.3f} ## closed via {s.closed_by}, exit {code}")


def summary(name: str, records: list[dict[str, Any]]) -> list[str]:
    lines = [f"== process {name}: pi --mode rpc"]
    previous, count = "", 0
    for record in records:
        label = _label(record)
        if label == previous:
            count += 1
            continue
        if previous:
            lines.append(f"   {previous}" + (f" x{count}" if count > 1 else ""))
        previous, count = label, 1
    if previous:
        lines.append(f"   {previous}" + (f" x{count}" if count > 1 else ""))
    return lines


def _label(record: dict[str, Any]) -> str:
    kind = str(record.get("type"))
    if kind == "response":
        ok = "ok" if record.get("success") else "err"
        data = record.get("data")
        extra = (
            f",{data['disposition']}" if isinstance(data, dict) and "disposition" in data else ""
        )
        return f"response({record.get('command')},{ok}{extra})"
    if kind in ("message_start", "message_end"):
        message = record.get("message") or {}
        stop = message.get("stopReason")
        role = message.get("role")
        return f"{kind}({role},{stop})" if kind == "message_end" and stop else f"{kind}({role})"
    if kind == "message_update":
        return f"message_update({(record.get('assistantMessageEvent') or {}).get('type')})"
    if kind == "extension_ui_request":
        return f"extension_ui_request({record.get('method')})"
    if kind == "agent_settled" and "aborted" in record:
        return f"agent_settled(aborted={str(record['aborted']).lower()})"
    return kind


def neutral(text: str, root: Path) -> str:
    """The throwaway paths, where the agents are installed and the fake's port, as fixed
    text: a recording names nothing of the machine it was made on."""
    text = text.replace(str(root), NEUTRAL)
    for installed in {str(agents_dir()), str(agents_dir().resolve())}:
        text = text.replace(installed, f"{NEUTRAL}/agents")
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:8000", text)


def write(folder: Path, name: str, files: dict[str, str], root: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, text in files.items():
        (folder / f"{name}.{suffix}").write_text(neutral(text, root), encoding="utf-8")


async def main(version: str, folder: Path) -> None:
    for name, script, body, extension in SCENARIOS:
        session, header, root = await record(version, name, script, body, extension)
        try:
            files = {
                "stdout.jsonl": session.stdout.decode("utf-8"),
                "stdin.jsonl": session.stdin.decode("utf-8"),
                "timeline.txt": "\n".join([*header, *session.timeline]) + "\n",
                "summary.txt": "\n".join(summary(name, session.records)) + "\n",
            }
            write(folder, name, files, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{name}: {len(session.records)} records, {session.timeline[-1].strip()}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    chosen = arguments[0] if arguments else DEFAULT_VERSION
    target = FIXTURES / (arguments[1] if len(arguments) > 1 else DEFAULT_FOLDER)
    asyncio.run(main(chosen, target))

"""`pi-bridge` as a subprocess, for the tests that run it as an operator would:
its environment, its config file, its agents (found by their cwd), and its end."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import anyio

from tests.support.agents import DEFAULT_VERSION, SUITE_USER, llm_ports
from tests.support.paths import REPO

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import Process

    from tests.support.agents import AgentHome

DRAIN = 5.0
WAIT = 60.0  # an answer, cold agent start included, on a loaded 2-core machine


def cli_env(tmp_path: Path, home: AgentHome | None = None, **extra: str) -> dict[str, str]:
    env = home.env() if home is not None else {"PATH": os.environ.get("PATH", os.defpath)}
    env |= {
        "PYTHONPATH": str(REPO),
        "PI_BRIDGE_DATA_DIR": str(tmp_path / "data"),
        "PI_BRIDGE_LOG_LEVEL": "INFO",
        # The bridge's agents end with it unless a test is about their outliving it
        # (tests/conversation/test_reattach.py): what these tests assert about stopping holds then.
        "PI_BRIDGE_ON_STOP": "stop",
    }
    if home is not None:
        env["PI_BRIDGE_AGENT_COMMAND"] = shlex.join(home.argv(DEFAULT_VERSION))
        # The fake LLM is on the host's loopback, which an isolated agent reaches only
        # on the ports listed, as an operator lists a local model server's.
        env["PI_BRIDGE_HOST_PORTS"] = ",".join(map(str, llm_ports(env)))
    env["PI_BRIDGE_SANDBOX_USER"] = SUITE_USER
    return env | extra


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "bridge.app.cli", *args]


def role_env(tmp_path: Path, env: dict[str, str], name: str, config: str) -> dict[str, str]:
    """`env` for a frontend (a name starting with "f") or a worker named `name`, each
    with its own config file holding `config`."""
    path = tmp_path / f"{name}.toml"
    path.write_text(config, encoding="utf-8")
    kind = "frontend" if name.startswith("f") else "worker"
    return env | {"PI_BRIDGE_CONFIG": str(path), "PI_BRIDGE_ROLE": kind}


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pi-bridge.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


async def run_cli(
    tmp_path: Path, env: dict[str, str], *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(90):
        return await anyio.run_process(
            command(*args), input=stdin, cwd=tmp_path, env=env, check=False
        )


def agent_processes(root: Path) -> list[int]:
    """Live processes whose cwd is under `root` (the bridge starts agents in workspaces)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd.is_relative_to(root) and cwd != root:
            found.append(int(entry.name))
    return found


def kill_agents(data: Path) -> None:
    """Agents this test's bridges started (their cwd is in its data dir), by pid."""
    for pid in agent_processes(data):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


@contextlib.asynccontextmanager
async def bridge_process(tmp_path: Path, env: dict[str, str], log: str) -> AsyncIterator[Process]:
    """`pi-bridge run`, its log in tmp_path/`log`; killed (with its agents) if the test fails."""
    with (tmp_path / log).open("wb") as err:
        process = await anyio.open_process(
            command("run"), cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stderr=err
        )
    try:
        yield process
    except BaseException:
        if process.returncode is None:
            process.kill()
        for pid in agent_processes(tmp_path / "data"):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # each agent leads its own process group
        print((tmp_path / log).read_text(errors="replace")[-6000:])
        raise
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await process.aclose()


async def stop(process: Process) -> int:
    process.send_signal(signal.SIGTERM)
    with anyio.fail_after(DRAIN + 30):
        return await process.wait()

"""No tool the agent runs can reach pi's process: its pipes, memory, environment.

The approval gate lives inside pi, and pi's stdin is where answers to its questions
arrive: a tool that could write there (or read pi's memory for the question's id, or
write forged events to pi's stdout) could answer its own approval question. Here a
real agent, in a real bridge, runs a bash tool that starts a probe; the probe finds pi
and its parent (bwrap's init in the sandbox, the keeper without it) and tries every
way in that the kernel offers a process of the same user: reopening their stdin and
stdout through /proc for writing, reading their environment and memory, ptrace and
pidfd_getfd. None may succeed, in either sandbox mode.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING

import pytest

from bridge.containment.sandbox import home_of
from bridge.options import SandboxOptions
from tests.support.agents import SUITE_USER, llm_ports
from tests.support.bridge_harness import KEY, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

# Run by the system's python3 inside the agent's sandbox; prints one JSON line.
PROBE = r"""
import ctypes, json, os, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])

def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()

pi = parent(os.getpid())  # above the tool's shell: pi (it renames itself, so no argv test)
while comm(pi) in ("bash", "sh", "dash", "python3"):
    pi = parent(pi)

def reopen(pid, fd):
    try:
        opened = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return "denied"
    kind = "pipe" if stat.S_ISFIFO(os.fstat(opened).st_mode) else "other"
    os.close(opened)
    return kind

def readable(path):
    try:
        os.close(os.open(path, os.O_RDONLY))
        return "read"
    except OSError:
        return "denied"

def traced(pid):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        os.waitpid(pid, 0x40000000)  # __WALL
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
        return "attached"
    return "denied"

def taken(pid):
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return "denied"
    got = libc.syscall(438, handle, 0, 0)  # pidfd_getfd(pidfd, fd 0, flags)
    os.close(handle)
    if got >= 0:
        os.close(got)
        return "taken"
    return "denied"

seen = {}
for name, pid in (("pi", pi), ("parent", parent(pi))):
    seen[name] = {
        "stdin": reopen(pid, 0), "stdout": reopen(pid, 1),
        "environ": readable(f"/proc/{pid}/environ"), "mem": readable(f"/proc/{pid}/mem"),
        "ptrace": traced(pid), "pidfd_getfd": taken(pid),
    }
seen["names"] = {"pi": comm(pi), "parent": comm(parent(pi))}
print("REACH=" + json.dumps(seen, sort_keys=True))
"""


def reach(llm: FakeLLM) -> dict[str, dict[str, str]]:
    """The probe's findings, from the tool result the agent sent the model."""
    results = [str(r.messages) for r in llm.requests if "tool" in str(r.messages)]
    found = re.search(r"REACH=(\{.*?\}\})(?:\\n|\"|')", results[-1].replace('\\"', '"'))
    assert found is not None, results[-1][-3000:]
    loaded: dict[str, dict[str, str]] = json.loads(found[1])
    return loaded


@pytest.mark.anyio
@pytest.mark.agent
@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_no_tool_reaches_pis_pipes_memory_or_environment(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, containment_version: str, mode: str
) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    command = f"python3 - < {tmp_path / 'probe.py'}"
    probe = Reply(tool_calls=[ToolCall("bash", {"command": command})])
    fake_llm.add("REACH", probe, Reply(text="Reached."))
    opts = options(tmp_path / "data", agent_home.argv(containment_version), agent_home.env())
    sandbox = SandboxOptions(
        read_only=(tmp_path,), host_ports=llm_ports(agent_home.env()), user=SUITE_USER
    )
    if mode == "off":
        sandbox = SandboxOptions(mode="off")
    opts = dataclasses.replace(opts, agent=dataclasses.replace(opts.agent, sandbox=sandbox))
    async with running_bridge(opts) as harness:
        await harness.say("REACH for pi")
        await harness.shown("Reached.")
    seen = reach(fake_llm)
    for target in ("pi", "parent"):
        # Reopened for writing, a pipe would be pi's own: answers in, events out.
        assert seen[target]["stdin"] != "pipe", (target, seen)
        assert seen[target]["stdout"] != "pipe", (target, seen)
    ways_in = ("environ", "mem", "ptrace", "pidfd_getfd", "stdin", "stdout")
    assert seen["pi"] == dict.fromkeys(ways_in, "denied"), seen


# pi loads the extensions in `<cwd>/.pi/extensions` (and those a `<cwd>/.pi/settings.json`
# names) into its own process at start, and the agent writes its cwd: planted there, an
# extension would run inside pi at the next start, where no sandbox separates it from
# pi's pipes. This one leaves a mark in the agent's home when it loads.
PLANTED = """
import { writeFileSync } from "node:fs";
export default function () {
  writeFileSync(`${process.env.HOME}/planted-ran`, "yes");
}
"""


@pytest.mark.anyio
@pytest.mark.agent
async def test_an_extension_planted_in_the_workspace_never_loads_into_pi(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, containment_version: str
) -> None:
    (tmp_path / "planted.ts").write_text(PLANTED)
    plant = (
        "mkdir -p .pi/extensions && cp {src} .pi/extensions/planted.ts"
        ' && printf \'{{"extensions": ["%s/planted-too.ts"]}}\' "$PWD" > .pi/settings.json'
        " && cp {src} planted-too.ts && echo planted"
    ).format(src=tmp_path / "planted.ts")
    fake_llm.add(
        "PLANT", Reply(tool_calls=[ToolCall("bash", {"command": plant})]), Reply(text="Planted.")
    )
    fake_llm.add("AGAIN", Reply(text="Started again."))
    sandbox = SandboxOptions(
        read_only=(tmp_path,), host_ports=llm_ports(agent_home.env()), user=SUITE_USER
    )
    opts = options(tmp_path / "data", agent_home.argv(containment_version), agent_home.env())
    opts = dataclasses.replace(opts, agent=dataclasses.replace(opts.agent, sandbox=sandbox))
    async with running_bridge(opts) as harness:
        await harness.say("PLANT an extension")
        await harness.shown("Planted.")
    workspace = opts.workspace(KEY)
    assert (workspace / ".pi" / "extensions" / "planted.ts").exists()
    async with running_bridge(opts) as harness:  # a new bridge: the agent starts anew
        await harness.say("AGAIN, please")
        await harness.shown("Started again.")
    assert not (home_of(opts, KEY) / "planted-ran").exists()
    # The person's own files are untouched: only pi does not load them.
    assert (workspace / ".pi" / "extensions" / "planted.ts").exists()

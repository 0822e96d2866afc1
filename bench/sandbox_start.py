"""What the sandbox costs an agent's start: with bwrap and without, in one run.

Starts the project-installed pi agent (`.agents/bin/pi-<version>`) the way a
conversation does: with `PI_BRIDGE_SANDBOX=off`, in its bwrap sandbox on the host's
network (`network = "host"`, the default before each agent had its own), and in its
bwrap sandbox with its own network through pasta (`"isolated"`, the default), and, run
as root, the same as the unprivileged agents' user (`"dropped"`: the default of a root
bridge; the others keep root with `user = "root"`); the same `contain()` the bridge uses
(private home, config copy, hidden data dir, the non-dumpable preload). They alternate
so that load on the machine falls on all alike, and it times
from spawn to the first `get_state` answer (the bridge waits for that before it
sends a prompt). A second pair does the same for `/bin/true`, which exits at once:
the floor of the start path itself (keeper, bwrap, namespaces, mounts), without
node's own start-up.

Run from the repository root: `.venv/bin/python bench/sandbox_start.py [--runs N]
[--version 0.73.1]`. Prints medians, p90s, the ratio sandboxed/unsandboxed and what the
agent's own network adds (isolated/host).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio

if __package__ in (None, ""):
    # Run as a script: measure this checkout's `bridge`, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bridge.containment.sandbox import contain
from bridge.options import AgentOptions, BridgeOptions, NetworkMode, SandboxOptions
from bridge.rpc.client import AgentClient
from bridge.rpc.process import AgentSpec, spawn, terminate_group

ROOT = Path(__file__).resolve().parents[1]


# No sandbox; bwrap on the host's network; its own network; and as the agents' user.
MODES = ("off", "host", "isolated", *(("dropped",) if os.geteuid() == 0 else ()))


def options(data: Path, argv: tuple[str, ...], mode: str) -> BridgeOptions:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(data / "operator")}
    env |= {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    if mode == "off":
        sandbox = SandboxOptions(mode="off")
    else:
        network: NetworkMode = "host" if mode == "host" else "isolated"
        sandbox = SandboxOptions(network=network, user="" if mode == "dropped" else "root")
    return BridgeOptions(data_dir=data, agent=AgentOptions(argv=argv, env=env, sandbox=sandbox))


def spec_for(opts: BridgeOptions, key: str) -> AgentSpec:
    workspace, session = opts.workspace(key), opts.session_dir(key)
    workspace.mkdir(parents=True, exist_ok=True)
    session.mkdir(parents=True, exist_ok=True)
    spec = AgentSpec(argv=opts.agent.argv, cwd=workspace, env=opts.agent.env)
    return contain(spec, opts, key, session)


async def agent_start(opts: BridgeOptions) -> float:
    """Seconds from spawn to the agent's first get_state answer."""
    started = time.perf_counter()
    spec = spec_for(opts, "tg:1")  # contain() (the config copy) is part of the cost
    async with AgentClient(spec) as agent:
        await agent.get_state()
        took = time.perf_counter() - started
    return took


async def true_start(opts: BridgeOptions) -> float:
    """Seconds from spawn to the exit of /bin/true: the start path alone."""
    started = time.perf_counter()
    process = await spawn(replace(spec_for(opts, "tg:1"), argv=["/bin/true"]))
    await process.wait()
    took = time.perf_counter() - started
    await terminate_group(process)
    return took


def summary(name: str, results: dict[str, list[float]]) -> None:
    def line(label: str, xs: list[float]) -> str:
        ordered = sorted(xs)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        median = statistics.median(xs) * 1000
        return f"  {label:<9} median {median:8.1f} ms   p90 {p90 * 1000:8.1f} ms"

    def ratio(over: str, under: str) -> str:
        a, b = statistics.median(results[over]), statistics.median(results[under])
        return f"  {over}/{under} {a / b:.2f}  ({(a - b) * 1000:+.1f} ms per start)"

    print(f"{name} ({len(results['off'])} starts each)")
    for mode in MODES:
        print(line(mode, results[mode]))
    print(ratio("host", "off"))
    print(ratio("isolated", "off"))
    print(ratio("isolated", "host"))
    if "dropped" in results:
        print(ratio("dropped", "isolated"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--version", default="0.73.1")
    args = parser.parse_args()
    pi = ROOT / ".agents" / "bin" / f"pi-{args.version}"
    if not pi.exists():
        sys.exit(f"{pi} is missing: run `bash deploy/dev-setup.sh` first")
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="pi-bridge-bench-") as scratch:
        data = Path(scratch)
        await anyio.Path(data).chmod(0o711)  # the agents' user passes through to its folders
        (data / "operator").mkdir()
        argv = (str(pi), "--mode", "rpc")
        for name, measure, runs in (
            ("/bin/true: the start path", true_start, args.runs * 4),
            (f"pi {args.version}: spawn to get_state", agent_start, args.runs),
        ):
            results: dict[str, list[float]] = {mode: [] for mode in MODES}
            await measure(options(data, argv, "isolated"))  # warm the page cache for all
            for _ in range(runs):
                for mode in MODES:
                    results[mode].append(await measure(options(data, argv, mode)))
            summary(name, results)


if __name__ == "__main__":
    anyio.run(main)

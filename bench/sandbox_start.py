"""What the sandbox costs an agent's start: with bwrap and without, in one run.

Starts the project-installed pi agent (`.agents/bin/pi-<version>`) the way a
conversation does, once with `PI_BRIDGE_SANDBOX=off` and once in its bwrap sandbox
(the same `contain()` the bridge uses: private home, config copy, hidden data dir),
alternating the two so that load on the machine falls on both alike, and times
from spawn to the first `get_state` answer (the bridge waits for that before it
sends a prompt). A second pair does the same for `/bin/true`, which exits at once:
the floor of the start path itself (keeper, bwrap, namespaces, mounts), without
node's own start-up.

Run from the repository root: `.venv/bin/python bench/sandbox_start.py [--runs N]
[--version 0.73.1]`. Prints medians, p90s and the ratio sandboxed/unsandboxed.
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

from bridge.options import AgentOptions, BridgeOptions, SandboxOptions
from bridge.rpc import AgentClient
from bridge.rpc.process import AgentSpec, spawn, terminate_group
from bridge.sandbox import contain

ROOT = Path(__file__).resolve().parents[1]


def options(data: Path, argv: tuple[str, ...], mode: str) -> BridgeOptions:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(data / "operator")}
    env |= {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    sandbox = SandboxOptions(mode="bwrap" if mode == "bwrap" else "off")
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


def summary(name: str, off: list[float], on: list[float]) -> None:
    def line(label: str, xs: list[float]) -> str:
        ordered = sorted(xs)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        return (
            f"  {label:<6} median {statistics.median(xs) * 1000:8.1f} ms   p90 {p90 * 1000:8.1f} ms"
        )

    print(f"{name} ({len(off)} starts each)")
    print(line("off", off))
    print(line("bwrap", on))
    ratio = statistics.median(on) / statistics.median(off)
    extra = (statistics.median(on) - statistics.median(off)) * 1000
    print(f"  bwrap/off {ratio:.2f}  ({extra:+.1f} ms per start)")


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
        (data / "operator").mkdir()
        argv = (str(pi), "--mode", "rpc")
        for name, measure, runs in (
            ("/bin/true: the start path", true_start, args.runs * 4),
            (f"pi {args.version}: spawn to get_state", agent_start, args.runs),
        ):
            results: dict[str, list[float]] = {"off": [], "bwrap": []}
            await measure(options(data, argv, "bwrap"))  # warm the page cache for both
            for _ in range(runs):
                for mode in ("off", "bwrap"):
                    results[mode].append(await measure(options(data, argv, mode)))
            summary(name, results["off"], results["bwrap"])


if __name__ == "__main__":
    anyio.run(main)

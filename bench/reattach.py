"""Agent hosts (issue 17): what relaying through a host costs, and how fast 50 reattach.

Stand-in agents (`bench/standin_stream_agent.py`: processes that speak the pi RPC
protocol and stream scripted answers at a set rate). Three measurements (details and
figures in docs/performance.md, "Agent hosts (reattach)"):

1. **relay**: CPU per agent record on the bridge's side (this process, plus the host's
   utime + stime from /proc), one stand-in driven by an `AgentClient` streaming 20,000
   deltas at 20,000/s until `RunEnded`, as a plain child (`ProcessLink`) against under a
   host (`HostPlan`). The keeper is in both paths and moves no bytes: not counted. The
   variants alternate, 3 runs each; medians and their ratio host/direct (goal ≤ 1.2).
2. **reattach** (rpc level, no `Bridge`): 50 stand-ins under hosts, 20 deltas/s each;
   all 50 clients detach, 1 s passes, all 50 reattach at once
   (`AgentClient(..., reattach=(address, last_seq))`). Timed from the start of
   reattaching to each client's first event and to its catching up (receiving the last
   delta its agent wrote before reattaching; `marks=1` stamps every delta).
3. **bridge**: the same through a whole `Bridge` with `on_stop="detach"`: 50
   conversations stream, the bridge detaches, 1 s later a new one takes them back;
   timed to each chat's first platform call and to its catching up, for runs 10 s and
   3 min old (`--ages`; `--snapshots off` as before issue 34, each run replayed from
   its start). See `bench/reattach_bridge.py`.

No host or stand-in is left behind, even on an error: every client is closed, each
host this run started (its socket in this run's temporary folder) gets SIGTERM if still
there, and part 3 checks for every process naming its own temporary folder.

Run from the repository root: `.venv/bin/python -m bench.reattach` (or
`.venv/bin/python bench/reattach.py`) `[--deltas N] [--rate R] [--runs N]
[--agents N] [--stream-rate R] [--away S] [--lead S] [--ages A,B] [--snapshots on|off]
[--only relay,reattach,bridge]`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if __package__ in (None, ""):
    # Run as a script: measure this checkout's `bridge`, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.reattach_bridge import measure_bridge, percentile
from bench.standin_stream_agent import MARK, read_emits, records_per_run
from bridge.rpc.client import AgentClient
from bridge.rpc.events import MessageUpdate
from bridge.rpc.hostlink import HostAddress, HostLink, HostPlan
from bridge.rpc.process import AgentSpec
from bridge.rpc.signals import RunEnded

if TYPE_CHECKING:
    from bridge.rpc.profile import Profile

STANDIN = Path(__file__).resolve().parent / "standin_stream_agent.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")
START_LIMIT = 8  # agents starting at once in the reattach setup (2 CPUs)
WAIT = 120.0


def standin_spec(folder: Path, *extra: str) -> AgentSpec:
    # -I -S: the stand-in needs only the standard library.
    argv = (sys.executable, "-I", "-S", str(STANDIN), *extra)
    return AgentSpec(argv=argv, cwd=folder, env={"PATH": os.environ.get("PATH", os.defpath)})


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` so far."""
    stat = Path(f"/proc/{pid}/stat").read_text("utf-8", "replace")
    fields = stat[stat.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15


class Hosts:
    """The hosts this run started, to be ended if anything goes wrong."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pids: set[int] = set()

    def note(self, client: AgentClient) -> HostAddress:
        link = client.link
        assert isinstance(link, HostLink)
        self.pids.add(link.address.pid)
        return link.address

    def leftovers(self) -> set[int]:
        """Hosts still running: those noted, and any whose socket is in our folder (one
        still starting when an error came)."""
        found = {pid for pid in self.pids if Path(f"/proc/{pid}").exists()}
        ours = str(self.folder).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if b"--socket" in argv and argv[argv.index(b"--socket") + 1].startswith(ours):
                    found.add(int(entry.name))
        return found

    async def end(self) -> list[int]:
        """SIGTERM every host left (it ends its agent in order); the pids signalled. A
        host whose client closed exits by itself once its agent has: wait for that."""
        with anyio.move_on_after(3):
            while self.leftovers():  # noqa: ASYNC110 (a process's end sets no event of ours)
                await anyio.sleep(0.05)
        left = sorted(self.leftovers())
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        with anyio.move_on_after(10):
            while self.leftovers():  # noqa: ASYNC110 (a process's end sets no event of ours)
                await anyio.sleep(0.1)
        return left


# --- 1. relay cost ---------------------------------------------------------------------


async def relay_once(
    folder: Path, hosts: Hosts, hosted: bool, deltas: int, rate: float
) -> tuple[float, float, float]:
    """CPU seconds of this process and of the host (0 when not hosted) for one run,
    and its wall time."""
    spec = standin_spec(folder)
    # A socket of its own: a host still ending removes its socket, whoever bound it.
    socket = folder / f"r{len(hosts.pids)}.sock"
    plan = HostPlan(socket=socket) if hosted else None
    client = AgentClient(spec, host=plan)
    async with client:
        host_pid = hosts.note(client).pid if hosted else 0
        gc.collect()
        host0 = cpu_of(host_pid) if hosted else 0.0
        cpu0, wall0 = time.process_time(), time.monotonic()
        async with anyio.create_task_group() as tg:
            ended = anyio.Event()

            async def consume() -> None:
                async for event in client.events:
                    if isinstance(event, RunEnded):
                        ended.set()
                        return

            tg.start_soon(consume)
            await client.prompt(f"bench id=relay deltas={deltas} rate={rate:g}")
            with anyio.fail_after(WAIT):
                await ended.wait()
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        host = cpu_of(host_pid) - host0 if hosted else 0.0
    return cpu, host, wall


async def measure_relay(folder: Path, hosts: Hosts, deltas: int, rate: float, runs: int) -> None:
    records = records_per_run(deltas)
    print(
        f"1. relay: CPU per agent record, one stand-in streaming {deltas} deltas at "
        f"{rate:g}/s ({records} records a run), {runs} runs of each, alternating",
        flush=True,
    )
    got: dict[str, list[float]] = {"direct": [], "host": []}
    await relay_once(folder, hosts, False, 200, 0)  # warm imports and the page cache
    await relay_once(folder, hosts, True, 200, 0)
    for n in range(runs):
        for name in ("direct", "host"):
            cpu, host_cpu, wall = await relay_once(folder, hosts, name == "host", deltas, rate)
            got[name].append((cpu + host_cpu) / records * 1e6)
            split = (
                f" (this process {cpu / records * 1e6:.2f} + host {host_cpu / records * 1e6:.2f})"
                if name == "host"
                else ""
            )
            print(
                f"   run {n + 1} {name:<6}: {cpu + host_cpu:.3f} s CPU in {wall:.2f} s, "
                f"{got[name][-1]:.2f} µs/record{split}"
            )
    direct, host = statistics.median(got["direct"]), statistics.median(got["host"])
    ratio = host / direct
    print(
        f"   median: direct {direct:.2f} µs/record, host {host:.2f} µs/record "
        f"(+{host - direct:.2f} µs); host/direct {ratio:.2f} "
        f"→ {'PASS' if ratio <= 1.2 else 'FAIL'} (goal ≤ 1.2)",
        flush=True,
    )


# --- 2. reattach with N agents streaming ------------------------------------------------


@dataclass
class Agent:
    index: int
    spec: AgentSpec
    stamps: Path
    socket: Path
    address: HostAddress | None = None
    last_seq: int = 0
    profile: Profile | None = None
    first: float = math.nan  # monotonic arrival of the first event after reattaching
    arrivals: dict[int, float] = field(default_factory=dict)  # delta marker → arrival


async def drain(client: AgentClient, agent: Agent | None = None) -> None:
    """Read every event; with `agent`, note when each delta marker arrived."""
    async for event in client.events:
        if agent is None:
            continue
        now = time.monotonic()
        if math.isnan(agent.first):
            agent.first = now
        if isinstance(event, MessageUpdate) and (text := event.assistantMessageEvent.delta):
            for match in MARK.finditer(text):
                agent.arrivals.setdefault(int(match.group(1)), now)


async def start_and_detach(
    agent: Agent,
    hosts: Hosts,
    limiter: anyio.CapacityLimiter,
    deltas: int,
    rate: float,
    started: list[Agent],
    ready: anyio.Event,
    total: int,
) -> None:
    async with limiter:
        client = AgentClient(agent.spec, host=HostPlan(socket=agent.socket))
        await client.__aenter__()
    try:
        agent.address = hosts.note(client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, client)
            await client.prompt(f"bench id=a{agent.index} deltas={deltas} rate={rate:g} marks=1")
            started.append(agent)
            if len(started) == total:
                ready.set()
            await ready.wait()
            tg.cancel_scope.cancel()
        client.detach()  # closing now leaves the agent running under its host
        await client.aclose()
        link = client.link
        assert isinstance(link, HostLink)
        agent.last_seq, agent.profile = link.last_seq, client.profile  # its reader is done
    finally:
        await client.aclose()  # after detaching: nothing left to do; on an error: ends it


async def reattach(agent: Agent, done: anyio.Event) -> None:
    assert agent.address is not None
    client = AgentClient(
        agent.spec, profile=agent.profile, reattach=(agent.address, agent.last_seq)
    )
    async with client, anyio.create_task_group() as tg:
        tg.start_soon(drain, client, agent)
        await done.wait()
        tg.cancel_scope.cancel()
    # Leaving `async with client` ends the agent and then its host.


async def measure_reattach(
    folder: Path, hosts: Hosts, count: int, rate: float, away: float, lead: float
) -> None:
    print(
        f"2. reattach: {count} stand-ins under hosts, each streaming {rate:g} deltas/s; "
        f"all detach, {away:g} s away, then all reattach at once",
        flush=True,
    )
    deltas = int(rate * 600)  # longer than the measurement: still streaming at the end
    agents = []
    for i in range(count):
        stamps = folder / f"s{i}.txt"
        spec = standin_spec(folder, "--stamps", str(stamps))
        agents.append(Agent(i, spec, stamps, folder / f"h{i}.sock"))
    limiter = anyio.CapacityLimiter(START_LIMIT)
    started: list[Agent] = []
    ready = anyio.Event()
    setup0 = time.monotonic()
    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            for agent in agents:
                tg.start_soon(
                    start_and_detach, agent, hosts, limiter, deltas, rate, started, ready, count
                )
    setup = time.monotonic() - setup0
    await anyio.sleep(away)
    # All stay attached (and streaming) until `lead` seconds after the last one's first
    # event, then close together. When each caught up is known only afterwards: from the
    # stamps its agent writes when its run ends.
    done = anyio.Event()
    load = " ".join(f"{n:.2f}" for n in os.getloadavg())
    t0 = time.monotonic()
    try:
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                for agent in agents:
                    tg.start_soon(reattach, agent, done)
                while any(math.isnan(a.first) for a in agents):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
                all_first = time.monotonic() - t0
                await anyio.sleep(lead)
                closing = time.monotonic()
                done.set()
    finally:
        done.set()
    closed = time.monotonic() - closing
    # Every run has been aborted by now: each agent wrote the times of its deltas.
    firsts, catch_ups, replayed = [], [], []
    for agent in agents:
        emits = read_emits(agent.stamps).get(f"a{agent.index}", [])
        backlog = sum(1 for t in emits if t < t0)  # deltas written before reattaching
        firsts.append(agent.first - t0)
        # Deltas written while detached and before reattaching: the replay.
        replayed.append(backlog - min(agent.arrivals, default=backlog + 1) + 1)
        arrived = agent.arrivals.get(backlog)
        catch_ups.append(math.inf if arrived is None else arrived - t0)
    late = sum(1 for c in catch_ups if c == math.inf)
    ms = 1000
    print(
        f"   setup: {count} hosts started and prompted in {setup:.1f} s; load average "
        f"{load} when reattaching; closing all took {closed:.1f} s",
    )
    print(
        f"   first event after reattaching: min {min(firsts) * ms:.0f} ms, "
        f"p50 {percentile(firsts, 50) * ms:.0f} ms, "
        f"max {max(firsts) * ms:.0f} ms; all {count} have one after {all_first * ms:.0f} ms "
        f"→ {'PASS' if all_first < 2 else 'FAIL'} (goal < 2 s for the whole bridge)",
    )
    print(
        f"   caught up (the last delta written before reattaching arrived): "
        f"min {min(catch_ups) * ms:.0f} ms, p50 {percentile(catch_ups, 50) * ms:.0f} ms, "
        f"max {max(catch_ups) * ms:.0f} ms"
        + (f" ({late} not within {all_first + lead:.1f} s)" if late else ""),
    )
    print(
        f"   deltas replayed (written while away): median {statistics.median(replayed):g}, "
        f"min {min(replayed)}, max {max(replayed)}",
        flush=True,
    )


# --- main ------------------------------------------------------------------------------

PHASES = ("relay", "reattach", "bridge")


async def run(args: argparse.Namespace) -> None:
    phases = [p.strip() for p in args.only.split(",")] if args.only else list(PHASES)
    for phase in phases:
        if phase not in PHASES:
            raise SystemExit(f"unknown phase {phase!r}; choose from {', '.join(PHASES)}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{n:.2f}" for n in os.getloadavg())
    print(f"python {platform.python_version()}, cpus {cpus}, {platform.machine()}, load {load}")
    # A short folder: a unix socket's path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="rb-", dir="/tmp") as tmp:
        folder = Path(tmp)
        hosts = Hosts(folder)
        try:
            if "relay" in phases:
                await measure_relay(folder, hosts, args.deltas, args.rate, args.runs)
            if "reattach" in phases:
                await measure_reattach(
                    folder, hosts, args.agents, args.stream_rate, args.away, args.lead
                )
        finally:
            with anyio.CancelScope(shield=True):
                left = await hosts.end()
            if left:
                print(f"   (ended {len(left)} hosts left running: {left})")
    if "bridge" in phases:
        ages = tuple(float(a) for a in args.ages.split(","))
        snapshots = args.snapshots == "on"
        await measure_bridge(
            args.agents, args.stream_rate, args.away, args.lead, ages, snapshots=snapshots
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--only", help=f"comma-separated phases of {', '.join(PHASES)}")
    parser.add_argument("--deltas", type=int, default=20000, help="relay: deltas per run")
    parser.add_argument("--rate", type=float, default=20000.0, help="relay: deltas per second")
    parser.add_argument("--runs", type=int, default=3, help="relay: runs of each variant")
    # These four are for both reattach and bridge.
    parser.add_argument("--agents", type=int, default=50, help="agents")
    parser.add_argument("--stream-rate", type=float, default=20.0, help="deltas/s each")
    parser.add_argument("--away", type=float, default=1.0, help="seconds detached")
    parser.add_argument("--lead", type=float, default=1.0, help="s attached after all have one")
    parser.add_argument(
        "--ages", default="10,180", help="bridge: how old the runs are when taken back, s"
    )
    parser.add_argument(
        "--snapshots", choices=("on", "off"), default="on", help="bridge: off replays runs whole"
    )
    anyio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    main()

"""Scale-out (frontends and workers on Redis, bridge/scale/): the Redis hop's latency,
and 1,000 conversations spread over 3 workers.

Everything runs against a throwaway `redis-server` on 127.0.0.1
(`tests.support.redis_server.RedisServer`), which is also the store (`redis://`), with
stand-in agents (`bench/standin_stream_agent.py`, stamping each line they read on
stdin with `time.monotonic()`) and a recording adapter (`bench.pipeline.BenchAdapter`)
in place of the platform. The roles are assembled as `bridge/app/roles.py` does: a
frontend is a `Bridge` with `forward=Forwarder(...)` plus a `CallServer` making the
workers' platform calls; a worker is a `Worker`, a `CallLink` and a `Bridge` over a
`RemoteAdapter` with `shared=True, taken=worker.taken`.

1. **latency**: from `bridge.handle(inbound)` to the agent reading the line on its
   stdin, for `--role all` (one `Bridge`, same store, same stand-in) and for the split
   roles (frontend + worker in this process, one event loop, over Redis), in one run.
   Agents are warmed first; then the two setups alternate message by message (which one
   goes first alternates too): prompts to idle agents (each waits for the previous
   answer's end), then steers sent every `gap` while a long answer streams. Also the
   bridge's own `inbound_to_agent` histogram (mean) of each setup.
2. **spread**: one frontend (this process) and 3 workers (separate processes, so each
   role's CPU is its own: `/proc/<pid>/stat` utime+stime; this process's
   `time.process_time()`). N conversations each get one message (an instant answer):
   conversations per worker (their leases), live agents per worker, Redis
   `used_memory` per conversation. Then `--streaming` of them stream at once: CPU
   seconds per agent event for each role (and redis-server's). If the machine's memory
   cannot hold an agent per conversation, fewer stay live (idle ones are evicted) and
   the output says so.

Run from the repository root: `.venv/bin/python -m bench.scale [--only latency|spread]
[--messages N] [--conversations N] [--streaming N] [--deltas N] [--rate R]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import secrets
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import redis.asyncio as aioredis

from bench.pipeline import STANDIN, BenchAdapter, percentile
from bench.reattach_bridge import processes_naming, settle_processes
from bench.standin_stream_agent import records_per_run
from bridge.model import ChatRef, Inbound, PlatformLimits, Sender
from bridge.options import AgentOptions, BridgeOptions
from bridge.scale.calls import CallServer, calls_stream
from bridge.scale.frontend import Forwarder
from bridge.scale.lease import Leases
from bridge.scale.names import scale_prefix
from bridge.scale.owned import WorkerSettings
from bridge.scale.remote import CallLink, RemoteAdapter
from bridge.scale.stats import ScaleStats
from bridge.scale.worker import Worker
from bridge.service import Bridge
from bridge.store import open_store
from bridge.store.redis import DEFAULT_PREFIX
from tests.support.redis_server import RedisServer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from bridge.stats import Histogram
    from bridge.store.base import Store
    from tests.support.recording_adapter import Call

ROOT = Path(__file__).resolve().parents[1]  # workers run `-m bench.scale` from here
PLATFORM = "bench"
PREFIX = scale_prefix(DEFAULT_PREFIX)
SENDER = Sender("42", "bench")
POLL = 0.002
LIMITS = PlatformLimits(edit_interval=0.2, chat_rate=1000.0, global_rate=10000.0)
AGENT_MB = 16  # PSS of a stand-in and its reaper: about 12 MB; with room to spare
GOAL_MS = 5.0  # what the Redis hop may add at p99


def bridge_options(data_dir: Path, stamps: Path, max_agents: int) -> BridgeOptions:
    # -I -S: the stand-in needs only the standard library. The sandbox is off (default).
    argv = (sys.executable, "-I", "-S", str(STANDIN), "--stamps", str(stamps))
    return BridgeOptions(
        data_dir=data_dir,
        agent=AgentOptions(argv=argv, env={"PATH": os.environ.get("PATH", os.defpath)}),
        allowed_users=None,
        max_agents=max_agents,
        max_per_user=max_agents,  # one sender stands for many people here
        drain_timeout=5.0,
        inbox_size=1024,
    )


def inbound(key: str, text: str) -> Inbound:
    return Inbound(key, ChatRef(key.rsplit(":", 1)[-1]), SENDER, uuid.uuid4().hex, text=text)


# --- the roles, as bridge/app/roles.py assembles them --------------------------------------


@contextlib.asynccontextmanager
async def frontend(
    client: aioredis.Redis, store: Store, options: BridgeOptions, adapter: BenchAdapter
) -> AsyncIterator[Bridge]:
    stats = ScaleStats(role="frontend", name="front")
    forward = Forwarder(client, PREFIX, options, stats)
    leases = Leases(client, PREFIX)
    calls = CallServer(client, PREFIX, PLATFORM, adapter, "front", leases.current_token, stats)
    async with (
        Bridge(adapter, store, options, forward=forward) as bridge,
        anyio.create_task_group() as tg,
    ):
        await tg.start(calls.run)
        yield bridge
        tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def worker(
    client: aioredis.Redis, store: Store, options: BridgeOptions, name: str, owned: int
) -> AsyncIterator[Bridge]:
    settings = WorkerSettings(name=name, instance=secrets.token_hex(4), max_agents=owned)
    stats = ScaleStats(role="worker", name=name)
    work = Worker(client, PREFIX, settings, stats)
    link = CallLink(client, PREFIX, settings.holder, stats)
    async with anyio.create_task_group() as tg:
        await tg.start(link.run)
        local = BenchAdapter(LIMITS, lean=True)  # its limits and formatting only
        remote = RemoteAdapter(local, link, PLATFORM, work.fence)
        async with Bridge(remote, store, options, shared=True, taken=work.taken) as bridge:
            work.bridges = [bridge]
            await tg.start(work.run)
            try:
                yield bridge
            finally:
                with anyio.CancelScope(shield=True):
                    await work.hand_over()
        with anyio.CancelScope(shield=True):
            await work.hand_over(running_too=True)
        tg.cancel_scope.cancel()


# --- stamps --------------------------------------------------------------------------------


class Stamps:
    """The stand-ins' stamp file, read as it grows: run id → (command, monotonic time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: dict[str, tuple[str, float]] = {}
        self._offset = 0

    def update(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].decode().splitlines():
            parts = line.split(" ")
            for word in parts[2:]:
                if word.startswith("id="):
                    self.seen.setdefault(word[3:], (parts[1], float(parts[0])))

    async def wait(self, run_id: str, within: float = 30.0) -> float:
        with anyio.fail_after(within):
            while run_id not in self.seen:
                self.update()
                if run_id not in self.seen:
                    await anyio.sleep(POLL)
        return self.seen[run_id][1]


# --- 1. latency ----------------------------------------------------------------------------


@dataclass
class Setup:
    label: str
    entry: Bridge  # where inbounds are handed in
    runner: Bridge  # where the agents run
    adapter: BenchAdapter  # where the platform calls land
    keys: list[str]
    sent: dict[str, float] = field(default_factory=dict)  # run id → handle() called
    kinds: dict[str, str] = field(default_factory=dict)  # run id → "prompt" | "steer"

    def busy(self, key: str) -> bool:
        conversation = self.runner.supervisor.conversations.get(key)
        return conversation is not None and conversation.busy

    async def say(self, key: str, run_id: str, text: str, kind: str) -> None:
        message = inbound(key, f"bench id={run_id} {text}")
        self.kinds[run_id] = kind
        self.sent[run_id] = time.monotonic()
        await self.entry.handle(message)

    async def settle(self, run_id: str, key: str, within: float = 30.0) -> None:
        with anyio.fail_after(within):
            while run_id not in self.adapter.ended or self.busy(key):  # noqa: ASYNC110
                await anyio.sleep(POLL)


def histogram_mean(h: Histogram, before: tuple[int, float]) -> str:
    n, total = h.count - before[0], h.total - before[1]
    return f"{total / n * 1000:.2f} ms over {n}" if n else "none"


async def measure_latency(messages: int, chats: int, gap: float) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="scale-lat-", dir="/tmp") as tmp:
        folder = Path(tmp)
        try:
            return await _latency(folder, messages, chats, gap)
        finally:
            with anyio.CancelScope(shield=True):
                left = await settle_processes(folder)
            if left:
                print(f"   processes left and sent SIGTERM: {left}")


async def _latency(folder: Path, messages: int, chats: int, gap: float) -> list[str]:
    stamps = Stamps(folder / "stamps.txt")
    with RedisServer(folder / "redis") as server:
        store = await open_store(server.url, folder)
        client = aioredis.from_url(server.url, decode_responses=True)
        try:
            all_options = bridge_options(folder / "all", stamps.path, chats + 4)
            split_options = bridge_options(folder / "split", stamps.path, chats + 4)
            all_adapter = BenchAdapter(LIMITS)
            front_adapter = BenchAdapter(LIMITS)
            async with (
                Bridge(all_adapter, store, all_options) as all_bridge,
                frontend(client, store, split_options, front_adapter) as front,
                worker(client, store, split_options, "w1", chats + 4) as runner,
            ):
                setups = [
                    Setup(
                        "all",
                        all_bridge,
                        all_bridge,
                        all_adapter,
                        [f"all:{i}" for i in range(chats)],
                    ),
                    Setup(
                        "split", front, runner, front_adapter, [f"split:{i}" for i in range(chats)]
                    ),
                ]
                return await _latency_runs(setups, stamps, messages, gap)
        finally:
            await client.aclose()
            await store.aclose()


async def _latency_runs(
    setups: list[Setup], stamps: Stamps, messages: int, gap: float
) -> list[str]:
    await _warm(setups)
    marks = {
        s.label: (
            s.runner.services.stats.inbound_to_agent.count,
            s.runner.services.stats.inbound_to_agent.total,
        )
        for s in setups
    }
    load = os.getloadavg()
    # Prompts to idle agents, the setups alternating (and which goes first, too).
    for i in range(messages):
        order = setups if i % 2 == 0 else setups[::-1]
        for s in order:
            key = s.keys[i % len(s.keys)]
            run_id = f"{s.label}-p{i}"
            await s.say(key, run_id, "deltas=2 rate=0", "prompt")
            await stamps.wait(run_id)
            await s.settle(run_id, key)
    prompt_hist = {
        s.label: histogram_mean(s.runner.services.stats.inbound_to_agent, marks[s.label])
        for s in setups
    }
    await _steer_while_streaming(setups, stamps, messages, gap)
    stamps.update()
    lines = [
        f"1. inbound → agent stdin latency (bridge.handle called → the stand-in read the line), "
        f"--role all against frontend + worker over Redis, alternating, {messages} each; "
        f"{len(setups[0].keys)} chats per setup, agents warm; load average {load[0]:.2f}"
    ]
    p99s: dict[tuple[str, str], float] = {}
    for kind, what in (
        ("prompt", "prompt to an idle agent"),
        ("steer", f"steer every {gap * 2 * 1000:g} ms while streaming 200 deltas/s"),
    ):
        lines.append(f"   {what}:")
        for s in setups:
            lines.append(_latency_line(s, stamps, kind, p99s, prompt_hist))
        if (kind, "all") in p99s and (kind, "split") in p99s:
            added = p99s[(kind, "split")] - p99s[(kind, "all")]
            lines.append(
                f"     the Redis hop adds {added:.2f} ms at p99 "
                f"→ {'PASS' if added <= GOAL_MS else 'FAIL'} (goal ≤ {GOAL_MS:g} ms)"
            )
    return lines


async def _warm(setups: list[Setup]) -> None:
    """Each conversation's agent started and answered a few times, unmeasured."""
    for round_ in range(3):
        for s in setups:
            for key in s.keys:
                run_id = f"{s.label}-warm{round_}-{key.rsplit(':', 1)[1]}"
                await s.say(key, run_id, "deltas=0", "warm")
                await s.settle(run_id, key)


async def _steer_while_streaming(
    setups: list[Setup], stamps: Stamps, messages: int, gap: float
) -> None:
    """Steers while a long answer streams (200 deltas/s) in each setup's first chat."""
    deltas = int((messages * 2 * gap * 2 + 5) * 200)  # longer than the steers take
    for s in setups:
        run_id = f"{s.label}-long"
        await s.say(s.keys[0], run_id, f"deltas={deltas} rate=200", "long")
        await stamps.wait(run_id)
        with anyio.fail_after(30):
            while not s.busy(s.keys[0]):  # noqa: ASYNC110
                await anyio.sleep(POLL)
    await anyio.sleep(0.5)
    for i in range(messages):
        for s in setups if i % 2 == 0 else setups[::-1]:
            await s.say(s.keys[0], f"{s.label}-s{i}", "", "steer")
            await anyio.sleep(gap)
    for s in setups:
        await s.settle(f"{s.label}-long", s.keys[0], within=deltas / 200 + 60)


def _latency_line(
    s: Setup,
    stamps: Stamps,
    kind: str,
    p99s: dict[tuple[str, str], float],
    prompt_hist: dict[str, str],
) -> str:
    """One setup's latencies of `kind` (its p99 noted in `p99s`)."""
    got = [
        (stamps.seen[r][1] - t) * 1000
        for r, t in s.sent.items()
        if s.kinds[r] == kind and stamps.seen.get(r, ("",))[0] == kind
    ]
    wanted = sum(1 for r in s.sent if s.kinds[r] == kind)
    if not got:
        return f"     {s.label:5}: none of {wanted} reached the agent as {kind}"
    p99s[(kind, s.label)] = percentile(got, 99)
    return (
        f"     {s.label:5}: n {len(got)}"
        + (f" (of {wanted})" if len(got) < wanted else "")
        + f", p50 {percentile(got, 50):.2f} ms, p99 {percentile(got, 99):.2f} ms, "
        f"max {max(got):.2f} ms, mean {statistics.fmean(got):.2f} ms"
        + (f"; bridge's inbound_to_agent mean {prompt_hist[s.label]}" if kind == "prompt" else "")
    )


# --- 2. spread -----------------------------------------------------------------------------


class CountingAdapter(BenchAdapter):
    """`BenchAdapter` counting the platform calls made (lean: it keeps none)."""

    made = 0

    def _record(self, call: Call) -> None:
        self.made += 1
        super()._record(call)


def cpu_of(pid: int) -> float:
    """utime + stime of a process (not its children), in seconds."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_processes(stamps: Path) -> tuple[int, int]:
    """The stand-ins whose command line names `stamps` (not their reapers), and the
    PSS in KB of them and their reapers together."""
    agents = pss = 0
    for pid in processes_naming(stamps):
        with contextlib.suppress(OSError):
            if b"reaper.py" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                agents += 1
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
    return agents, pss


def mem_available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Cpu:
    front: float
    workers: list[float]
    redis: float


async def serve_worker(url: str, folder: str, name: str, owned: int, live: int) -> None:
    """A worker process (spawned by `measure_spread`): serve until SIGTERM."""
    data = Path(folder) / name
    options = bridge_options(data, Path(folder) / f"{name}-stamps.txt", live)
    store = await open_store(url, data)
    client = aioredis.from_url(url, decode_responses=True)
    try:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with worker(client, store, options, name, owned):
                print("ready", flush=True)
                async for _ in signals:
                    break
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
            await store.aclose()


async def measure_spread(
    conversations: int, workers: int, streaming: int, deltas: int, rate: float
) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="scale-spr-", dir="/tmp") as tmp:
        folder = Path(tmp)
        try:
            return await _spread(folder, conversations, workers, streaming, deltas, rate)
        finally:
            with anyio.CancelScope(shield=True):
                left = await settle_processes(folder)
            if left:
                print(f"   processes left and sent SIGTERM: {left}")


async def _spread(
    folder: Path, conversations: int, workers: int, streaming: int, deltas: int, rate: float
) -> list[str]:
    lines: list[str] = []
    owned = conversations // workers + max(10, conversations // 10)  # room for an uneven spread
    # Memory: an agent per conversation if it fits, leaving 2 GB (the bridges, Redis).
    room = int((mem_available_mb() - 2048) / AGENT_MB)
    live = min(owned, max(streaming, room // workers))
    if live * workers < conversations:
        lines.append(
            f"   NOTE: {mem_available_mb():.0f} MB available holds about {room} agents: at "
            f"most {live} live per worker, idle ones are evicted (all {conversations} "
            "conversations are still claimed and answered)"
        )
    with RedisServer(folder / "redis") as server:
        client = aioredis.from_url(server.url, decode_responses=True)
        store = await open_store(server.url, folder)
        procs: list[Any] = []
        try:
            info = await client.info("server")
            redis_pid = int(info["process_id"])
            mem0 = int((await client.info("memory"))["used_memory"])
            front_adapter = CountingAdapter(LIMITS, lean=True)
            options = bridge_options(folder / "front", folder / "front-stamps.txt", 1)
            async with frontend(client, store, options, front_adapter) as front:
                await _start_workers(procs, workers, server.url, folder, owned, live)
                pids = [int(p.pid) for p in procs]
                mem_ready = int((await client.info("memory"))["used_memory"])

                def cpu() -> Cpu:
                    return Cpu(time.process_time(), [cpu_of(p) for p in pids], cpu_of(redis_pid))

                keys = [f"bench:{i}" for i in range(conversations)]
                load0 = os.getloadavg()
                c0, t0 = cpu(), time.monotonic()
                sent: dict[str, float] = {}
                for i, key in enumerate(keys):
                    sent[f"c{i}"] = time.monotonic()
                    await front.handle(inbound(key, f"bench id=c{i} deltas=0"))
                handed = time.monotonic() - t0
                with anyio.fail_after(60 + conversations * 0.5):
                    while len(front_adapter.ended) < conversations:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                await anyio.sleep(1.0)  # the last status edits
                c1, wall1 = cpu(), time.monotonic() - t0
                shown = [front_adapter.ended[r] - t for r, t in sent.items()]
                mem_conv = int((await client.info("memory"))["used_memory"])
                holders = await lease_holders(client, keys)
                found = [agent_processes(folder / f"w{n + 1}-stamps.txt") for n in range(workers)]
                agents = [a for a, _ in found]
                pss = sum(p for _, p in found)
                scale_bytes, store_bytes, nkeys, kinds = await key_memory(client)
                lines.append(
                    f"2. spread: {conversations} conversations over {workers} worker processes "
                    f"(each may own {owned}, {live} live agents), one frontend (this process); "
                    f"load average {load0[0]:.2f} before"
                )
                lines.append(
                    f"   {conversations} conversations claimed and answered (one instant answer "
                    f"each: agent spawned) in {wall1:.1f} s (all handed to the frontend in "
                    f"{handed:.2f} s); handed → answer shown: p50 {percentile(shown, 50):.2f} s, "
                    f"p99 {percentile(shown, 99):.2f} s, max {max(shown):.2f} s"
                )
                per_worker = Counter(h.split("/", 1)[0] for h in holders.values())
                lines.append(
                    "   conversations per worker (leases): "
                    + ", ".join(f"{w} {per_worker.get(w, 0)}" for w in sorted(per_worker))
                    + f" (no lease: {conversations - len(holders)}); live agents per worker: "
                    + ", ".join(f"w{n + 1} {a}" for n, a in enumerate(agents))
                    + f" (agents and their reapers: {pss / 1024:.0f} MB PSS, "
                    f"{pss / max(1, sum(agents)) / 1024:.1f} MB per agent)"
                )
                lines.append(
                    f"   CPU for that phase: frontend {c1.front - c0.front:.2f} s, workers "
                    + " + ".join(
                        f"{b - a:.2f}" for a, b in zip(c0.workers, c1.workers, strict=True)
                    )
                    + f" s, redis-server {c1.redis - c0.redis:.2f} s (per conversation: "
                    f"frontend {(c1.front - c0.front) / conversations * 1000:.2f} ms, workers "
                    f"{(sum(c1.workers) - sum(c0.workers)) / conversations * 1000:.2f} ms)"
                )
                lines.append(
                    f"   Redis used_memory: {mem0 / 2**20:.1f} MB empty, "
                    f"{mem_ready / 2**20:.1f} MB with the roles up, {mem_conv / 2**20:.1f} MB "
                    f"with {conversations} conversations → "
                    f"{(mem_conv - mem_ready) / conversations / 1024:.2f} KB per conversation; "
                    f"by key (MEMORY USAGE, {nkeys} keys): scale-out keys "
                    f"{scale_bytes / conversations / 1024:.2f} KB, store keys "
                    f"{store_bytes / conversations / 1024:.2f} KB per conversation; the "
                    "scale-out's by kind: "
                    + ", ".join(f"{k} {b / conversations:.0f} B" for k, b in kinds.most_common())
                )
                # Streaming: the first `streaming` conversations at once, wherever they are.
                chosen = keys[:streaming]
                load1 = os.getloadavg()
                c2, t2, made0 = cpu(), time.monotonic(), front_adapter.made
                for i, key in enumerate(chosen):
                    await front.handle(inbound(key, f"bench id=s{i} deltas={deltas} rate={rate:g}"))
                wanted = {f"s{i}" for i in range(streaming)}
                with anyio.fail_after(deltas / rate + 120):
                    while not wanted <= front_adapter.ended.keys():  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                await anyio.sleep(1.0)
                c3, wall3 = cpu(), time.monotonic() - t2
                events = streaming * records_per_run(deltas)
                streams_by = Counter(holders.get(k, "?").split("/", 1)[0] for k in chosen)
                w_cpu = [b - a for a, b in zip(c2.workers, c3.workers, strict=True)]
                f_cpu, r_cpu = c3.front - c2.front, c3.redis - c2.redis
                lines.append(
                    f"   {streaming} streaming at once ({deltas} deltas at {rate:g}/s each; "
                    + ", ".join(f"{w} {n}" for w, n in sorted(streams_by.items()))
                    + f"): {events} agent events in {wall3:.1f} s, load average "
                    f"{load1[0]:.2f} before"
                )
                lines.append(
                    f"   CPU: frontend {f_cpu:.2f} s ({f_cpu / events * 1e6:.1f} µs per agent "
                    "event), "
                    f"workers {' + '.join(f'{c:.2f}' for c in w_cpu)} = {sum(w_cpu):.2f} s "
                    f"({sum(w_cpu) / events * 1e6:.1f} µs per agent event), redis-server "
                    f"{r_cpu:.2f} s ({r_cpu / events * 1e6:.1f} µs per agent event); platform "
                    f"calls made by the frontend {front_adapter.made - made0}"
                )
                mem_end = int((await client.info("memory"))["used_memory"])
                calls_key = calls_stream(PREFIX, PLATFORM)
                kept = await client.xlen(calls_key)
                calls_mb = int(await client.memory_usage(calls_key, samples=0) or 0) / 2**20
                lines.append(
                    f"   Redis used_memory after the streams: {mem_end / 2**20:.1f} MB; the "
                    f"calls stream keeps {kept} entries (read and acknowledged), {calls_mb:.1f} MB"
                )
                for proc in procs:
                    proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(60):
                    codes = [await proc.wait() for proc in procs]
                lines.append(f"   workers ended (exit codes {codes})")
        finally:
            with anyio.CancelScope(shield=True):
                await _kill_left(procs)
                await client.aclose()
                await store.aclose()
    return lines


async def _start_workers(
    procs: list[Any], workers: int, url: str, folder: Path, owned: int, live: int
) -> None:
    """Start `workers` worker processes (into `procs`, so that they are ended whatever
    happens) and wait until each says it is ready."""
    for n in range(workers):
        argv = [
            sys.executable,
            "-m",
            "bench.scale",
            "--serve-worker",
            f"w{n + 1}",
            "--redis",
            url,
            "--folder",
            str(folder),
            "--owned",
            str(owned),
            "--live",
            str(live),
        ]
        procs.append(await anyio.open_process(argv, stdin=None, stderr=None, cwd=ROOT))
    for proc in procs:
        assert proc.stdout is not None
        with anyio.fail_after(60):
            line = await proc.stdout.receive()
        if b"ready" not in line:
            raise RuntimeError(f"worker said {line!r}")


async def _kill_left(procs: list[Any]) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def lease_holders(client: aioredis.Redis, keys: list[str]) -> dict[str, str]:
    leases = Leases(client, PREFIX)
    values = await client.mget([leases.lease_key(k) for k in keys])
    return {k: str(v) for k, v in zip(keys, values, strict=True) if v is not None}


async def key_memory(client: aioredis.Redis) -> tuple[int, int, int, Counter[str]]:
    """Bytes (MEMORY USAGE) of the scale-out's keys and of the store's other keys, the
    number of keys, and the scale-out's bytes by kind of key (`in`, `lease`, `seen`…)."""
    scale = other = n = 0
    kinds: Counter[str] = Counter()
    batch: list[str] = []

    async def flush() -> None:
        nonlocal scale, other
        async with client.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.memory_usage(key, samples=0)
            sizes: list[Any] = await pipe.execute()
        for key, size in zip(batch, sizes, strict=True):
            if key.startswith(PREFIX):
                scale += int(size or 0)
                kinds[key.removeprefix(PREFIX).split(":", 1)[0]] += int(size or 0)
            else:
                other += int(size or 0)
        batch.clear()

    async for key in client.scan_iter(count=1000):
        batch.append(str(key))
        n += 1
        if len(batch) >= 500:
            await flush()
    if batch:
        await flush()
    return scale, other, n, kinds


# --- main ----------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    cpus = len(os.sched_getaffinity(0))
    mem = mem_available_mb()
    print(
        f"python {platform.python_version()}, cpus {cpus}, {platform.machine()}, "
        f"{mem:.0f} MB available, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    if args.only in (None, "latency"):
        print("\n".join(await measure_latency(args.messages, args.chats, args.gap)), flush=True)
    if args.only in (None, "spread"):
        lines = await measure_spread(
            args.conversations, args.workers, args.streaming, args.deltas, args.rate
        )
        print("\n".join(lines), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--only", choices=("latency", "spread"))
    parser.add_argument("--messages", type=int, default=500, help="latency: per setup and kind")
    parser.add_argument("--chats", type=int, default=4, help="latency: conversations per setup")
    parser.add_argument("--gap", type=float, default=0.0125, help="latency: s between steers")
    parser.add_argument("--conversations", type=int, default=1000, help="spread")
    parser.add_argument("--workers", type=int, default=3, help="spread: worker processes")
    parser.add_argument("--streaming", type=int, default=50, help="spread: streaming at once")
    parser.add_argument("--deltas", type=int, default=1000, help="spread: deltas per stream")
    parser.add_argument("--rate", type=float, default=100.0, help="spread: deltas/s per stream")
    # Internal: one worker process of the spread measurement.
    parser.add_argument("--serve-worker", help=argparse.SUPPRESS)
    parser.add_argument("--redis", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--owned", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--live", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_worker:
        anyio.run(serve_worker, args.redis, args.folder, args.serve_worker, args.owned, args.live)
        return
    anyio.run(run, args)


if __name__ == "__main__":
    main()

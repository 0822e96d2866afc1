"""The whole pipeline under load: platform calls, CPU, latency and memory of the bridge.

A real `Bridge` (sqlite store in a temporary directory, `RecordingAdapter` in place of
a platform) drives stand-in agents (`bench/standin_stream_agent.py`, separate processes
that speak the pi RPC protocol and stream scripted answers at a set rate). Four
measurements, each on a fresh bridge:

1. **calls**: platform calls per streamed answer. One answer of 2000 deltas at 200/s
   (10 s) with `PlatformLimits(edit_interval=1.0)` (the default pacing: 1 call/s per
   chat). Counts the sends and edits of the answer's chat messages against the goal
   "no more than one edit per edit interval per message, plus the final".
2. **cpu**: bridge CPU per agent event. 20 conversations each stream 1000 deltas at
   500/s at once; the bridge process's CPU time (`time.process_time`, all its threads;
   the agents are other processes) over the agent records it read.
3. **latency**: from `bridge.handle(inbound)` to the agent reading the command from its
   stdin. The stand-in stamps each line it reads with `time.monotonic()` (on Linux the
   system-wide CLOCK_MONOTONIC, so comparable with the bench's clock). Measured for
   prompts to an idle agent (each after the previous run ended) and for steers sent
   while a long answer streams.
4. **rss**: the bridge's resident memory (`/proc/self/status`) with nothing known, after
   1000 conversations each had one instant answer (at most 50 live agents, so idle ones
   are evicted), and while 50 agents stream at once.

Run from the repository root: `.venv/bin/python bench/pipeline.py [--quick]
[--only calls,cpu,latency,rss] [--shape delta|snapshot] [--profile]`.
`--quick` is a smoke run with small numbers; `--profile` runs the cpu measurement
under cProfile and prints where the time went.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import itertools
import math
import os
import platform
import pstats
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if __package__ in (None, ""):
    # Run as a script: measure this checkout's `bridge`, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standin_stream_agent import records_per_run
from bridge.model import ChatRef, Inbound, MessageRef, PlatformLimits, Sender
from bridge.options import AgentOptions, BridgeOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.recording_adapter import Call, RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

STANDIN = Path(__file__).resolve().parent / "standin_stream_agent.py"
SENDER = Sender("42", "bench")
END = re.compile(r"\[end (\S+)\]")
POLL = 0.005
# Fast platform for everything but the calls measurement: pacing is not what is measured.
GENEROUS = PlatformLimits(edit_interval=1.0, chat_rate=1000.0, global_rate=10000.0)


# --- the bridge under test ---------------------------------------------------------------


class BenchAdapter(RecordingAdapter):
    """The recording adapter, noting when each answer's `[end <id>]` line reached the chat.

    With `lean=True` it keeps no call history and no per-message edit list, so a long
    measurement's RSS is the bridge's and not the recorder's.
    """

    def __init__(self, limits: PlatformLimits, *, lean: bool = False) -> None:
        super().__init__(limits)
        self.lean = lean
        self.ended: dict[str, float] = {}

    def _record(self, call: Call) -> None:
        # Every successful or failed call passes through here; the hook is the recorder's.
        if call.ok and "[end " in call.text:
            for run_id in END.findall(call.text):
                self.ended.setdefault(run_id, call.at)
        if not self.lean:
            super()._record(call)
            return
        if call.ref is not None and (message := self.messages.get(call.ref)) is not None:
            message.edits.clear()


@dataclass
class Rig:
    bridge: Bridge
    adapter: BenchAdapter
    stamps: Path

    async def say(self, key: str, text: str) -> float:
        """Deliver `text` from the bench user in conversation `key`; the monotonic time
        just before `handle` was called."""
        chat = ChatRef(key.rsplit(":", 1)[-1])
        inbound = Inbound(key, chat, SENDER, uuid.uuid4().hex, text=text)
        started = time.monotonic()
        await self.bridge.handle(inbound)
        return started

    def busy(self, key: str) -> bool:
        conversation = self.bridge.supervisor.conversations.get(key)
        return conversation is not None and conversation.busy

    async def settle(
        self, keys: Iterable[str], run_ids: Iterable[str], within: float, *, flush: bool = True
    ) -> None:
        """Until every answer in `run_ids` is shown and no conversation in `keys` is busy;
        with `flush`, also until every queued chat op is out. That includes the run
        status's "done" edit, which the outbox holds for the message's edit interval."""
        keys, wanted = list(keys), set(run_ids)
        with anyio.fail_after(within):
            while not wanted <= self.adapter.ended.keys() or any(map(self.busy, keys)):  # noqa: ASYNC110
                await anyio.sleep(POLL)
            if flush:
                await self.bridge.outbox.flush()


@contextlib.asynccontextmanager
async def rig(
    limits: PlatformLimits,
    shape: str,
    *,
    max_agents: int = 64,
    lean: bool = False,
) -> AsyncIterator[Rig]:
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        data_dir = Path(tmp)
        stamps = data_dir / "stamps.txt"
        # -I -S: the stand-in needs only the standard library; skipping site makes each
        # of the hundreds of spawns cheaper.
        argv = (sys.executable, "-I", "-S", str(STANDIN), "--shape", shape, "--stamps", str(stamps))
        options = BridgeOptions(
            data_dir=data_dir,
            agent=AgentOptions(argv=argv, env={"PATH": os.environ.get("PATH", "")}),
            allowed_users=None,
            max_agents=max_agents,
            # One sender stands for many people here: no per-person cap on live agents.
            max_per_user=max_agents,
            drain_timeout=5.0,
            inbox_size=1024,
        )
        adapter = BenchAdapter(limits, lean=lean)
        store = await open_store("sqlite", data_dir)
        try:
            async with Bridge(adapter, store, options) as bridge:
                yield Rig(bridge, adapter, stamps)
        finally:
            await store.aclose()


def read_stamps(path: Path) -> dict[str, tuple[str, float]]:
    """run id → (command type, monotonic time the agent read it), from the stamp file."""
    out: dict[str, tuple[str, float]] = {}
    for line in path.read_text().splitlines():
        seen, kind, message = line.split(" ", 2)
        match = re.search(r"\bid=(\S+)", message)
        if match is not None:
            out.setdefault(match.group(1), (kind, float(seen)))
    return out


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    fields: dict[str, float] = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", math.nan), fields.get("VmHWM", math.nan)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of values ≤ it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# --- 1. platform calls per answer --------------------------------------------------------


async def measure_calls(deltas: int, rate: float, shape: str) -> list[str]:
    limits = PlatformLimits(edit_interval=1.0)
    interval = limits.edit_interval
    key = "bench:1"
    async with rig(limits, shape) as r:
        await r.say(key, f"bench id=calls deltas={deltas} rate={rate:g}")
        await r.settle([key], ["calls"], within=deltas / rate + 60)
        calls = [c for c in r.adapter.calls if c.kind in ("send", "edit")]
    answer_refs = {c.ref for c in calls if c.ref is not None and c.ok and "tok " in c.text}
    per_ref: dict[MessageRef, list[Call]] = defaultdict(list)
    for call in calls:
        if call.ref in answer_refs:
            per_ref[call.ref].append(call)
    others = sum(1 for c in calls if c.ref not in answer_refs)
    lines = [
        f"1. platform calls per streamed answer: {deltas} deltas at {rate:g}/s "
        f"({deltas / rate:g} s), edit_interval {interval:g} s, chat_rate "
        f"{limits.chat_rate:g}/s"
    ]
    total = bound_total = 0
    ok = True
    for n, (ref, made) in enumerate(sorted(per_ref.items(), key=lambda kv: kv[1][0].at), 1):
        span = made[-1].at - made[0].at
        # Sends/edits spaced by ≥ interval fit floor(span / interval) + 1 in the span;
        # the final edit (the complete text) may come sooner: + 1.
        bound = math.floor(span / interval) + 2
        gaps = [b.at - a.at for a, b in itertools.pairwise(made[:-1])]
        short = sum(1 for g in gaps if g < interval - 0.01)
        failed = sum(1 for c in made if not c.ok)
        ok = ok and len(made) <= bound
        total += len(made)
        bound_total += bound
        min_gap = f"{min(gaps):.2f}" if gaps else "-"
        lines.append(
            f"   message {n} (id {ref.message_id}): {len(made)} calls "
            f"(1 send, {len(made) - 1} edits, {failed} failed) over {span:.1f} s; "
            f"bound {bound}; gaps < interval before the final: {short}; min gap {min_gap} s"
        )
    verdict = "PASS" if ok and per_ref else "FAIL"
    lines.append(
        f"   answer: {total} calls for {len(per_ref)} messages, bound {bound_total} → {verdict}"
        f"; other calls in the chat (run status, notices): {others}"
    )
    return lines


# --- 2. CPU per agent event --------------------------------------------------------------


async def measure_cpu(
    conversations: int, deltas: int, rate: float, shape: str, profile: bool
) -> list[str]:
    keys = [f"bench:{i}" for i in range(conversations)]
    async with rig(GENEROUS, shape) as r:
        # Spawn every agent and run one empty answer first: spawning is not per event.
        for i, key in enumerate(keys):
            await r.say(key, f"bench id=w{i} deltas=0")
        await r.settle(keys, [f"w{i}" for i in range(conversations)], within=120)
        await anyio.sleep(0.5)  # adopt_session's get_state after each warm-up run
        gc.collect()
        profiler = cProfile.Profile() if profile else None
        cpu0, wall0 = time.process_time(), time.monotonic()
        if profiler is not None:
            profiler.enable()
        for i, key in enumerate(keys):
            await r.say(key, f"bench id=c{i} deltas={deltas} rate={rate:g}")
        await r.settle(keys, [f"c{i}" for i in range(conversations)], within=deltas / rate + 120)
        if profiler is not None:
            profiler.disable()
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        sent = sum(1 for c in r.adapter.calls if c.at >= wall0)
    # Per run: the records of `records_per_run` plus the answer to the get_state the
    # bridge sends after every run (adopt_session).
    events = conversations * (records_per_run(deltas) + 1)
    lines = [
        f"2. bridge CPU per agent event ({shape} shape): {conversations} conversations, "
        f"{deltas} deltas each at {rate:g}/s, all at once",
        f"   {events} agent records in {wall:.2f} s; bridge CPU {cpu:.2f} s "
        f"({cpu / wall * 100:.0f}% of one core); platform calls {sent}",
        f"   {cpu / events * 1e6:.1f} µs CPU per agent event",
    ]
    if profiler is not None:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)
        lines.append(text.getvalue())
    return lines


# --- 3. inbound → agent stdin latency ------------------------------------------------


async def measure_latency(messages: int, shape: str) -> list[str]:
    key = "bench:1"
    async with rig(GENEROUS, shape) as r:
        await r.say(key, "bench id=warm deltas=0")
        await r.settle([key], ["warm"], within=60)
        prompts: dict[str, float] = {}
        for i in range(messages):
            # Each prompt once the previous run has ended: the agent is idle, not busy.
            prompts[f"p{i}"] = await r.say(key, f"bench id=p{i} deltas=2 rate=0")
            await r.settle([key], [f"p{i}"], within=30, flush=False)
        # Steers: one every 25 ms while a long answer streams at 200 deltas/s.
        gap = 0.025
        deltas = math.ceil((messages * gap + 2) * 200)
        await r.say(key, f"bench id=long deltas={deltas} rate=200")
        with anyio.fail_after(30):
            while not r.busy(key):  # noqa: ASYNC110
                await anyio.sleep(POLL)
        await anyio.sleep(0.5)
        steers: dict[str, float] = {}
        for i in range(messages):
            steers[f"s{i}"] = await r.say(key, f"bench id=s{i}")
            await anyio.sleep(gap)
        await r.settle([key], ["long"], within=deltas / 200 + 60)
        stamps = read_stamps(r.stamps)
    lines = ["3. inbound → agent stdin latency (bridge.handle called → agent read the line)"]
    for label, sent, kind in (
        ("prompt to an idle agent", prompts, "prompt"),
        ("steer while streaming 200 deltas/s", steers, "steer"),
    ):
        got = [
            (stamps[i][1] - t) * 1000 for i, t in sent.items() if stamps.get(i, ("",))[0] == kind
        ]
        if len(got) < len(sent):
            lines.append(f"   {label}: only {len(got)} of {len(sent)} reached the agent as {kind}")
        if not got:
            continue
        p99 = percentile(got, 99)
        lines.append(
            f"   {label}: n {len(got)}, p50 {percentile(got, 50):.2f} ms, p99 {p99:.2f} ms, "
            f"max {max(got):.2f} ms, mean {statistics.fmean(got):.2f} ms "
            f"→ {'PASS' if p99 < 5 else 'FAIL'} (goal p99 < 5 ms)"
        )
    return lines


# --- 4. RSS ------------------------------------------------------------------------------


async def measure_rss(known: int, max_agents: int, streaming: int, seconds: float) -> list[str]:
    gc.collect()
    rss0 = rss_mb()[0]
    async with rig(GENEROUS, "delta", max_agents=max_agents, lean=True) as r:
        rss_started = rss_mb()[0]
        keys = [f"bench:{i}" for i in range(known)]
        start = time.monotonic()
        for first in range(0, known, max_agents):
            batch = range(first, min(known, first + max_agents))
            for i in batch:
                await r.say(keys[i], f"bench id=k{i} deltas=0")
            await r.settle(
                [keys[i] for i in batch], [f"k{i}" for i in batch], within=300, flush=False
            )
        spawn_wall = time.monotonic() - start
        gc.collect()
        rss_known = rss_mb()[0]
        rate = 100.0
        deltas = int(seconds * rate)
        start = time.monotonic()
        for i in range(streaming):
            await r.say(keys[i], f"bench id=s{i} deltas={deltas} rate={rate:g}")
        samples: list[float] = []
        busy_peak = 0
        while time.monotonic() - start < seconds - 1:
            await anyio.sleep(0.25)
            samples.append(rss_mb()[0])
            busy_peak = max(busy_peak, sum(1 for k in keys[:streaming] if r.busy(k)))
        await r.settle(keys[:streaming], [f"s{i}" for i in range(streaming)], within=300)
        gc.collect()
        rss_after = rss_mb()[0]
        live = len(r.bridge.supervisor.slots.live)
        conversations = len(r.bridge.supervisor.conversations)
    per_conversation = (rss_known - rss_started) / known * 1024
    return [
        f"4. bridge RSS (VmRSS): {known} conversations with at most {max_agents} live agents, "
        f"then {streaming} streaming {deltas} deltas at {rate:g}/s ({seconds:g} s)",
        f"   before the bridge started: {rss0:.1f} MB; bridge started, nothing known: "
        f"{rss_started:.1f} MB",
        f"   {conversations} conversations known ({known} spawns in {spawn_wall:.1f} s): "
        f"{rss_known:.1f} MB (+{per_conversation:.1f} KB per conversation)",
        f"   {streaming} streaming at once (peak {busy_peak} busy): median "
        f"{statistics.median(samples):.1f} MB, max {max(samples):.1f} MB",
        f"   after the streams ended ({live} live agents): {rss_after:.1f} MB; "
        f"peak of the process (VmHWM) {rss_mb()[1]:.1f} MB",
    ]


# --- main --------------------------------------------------------------------------------

PHASES = ("calls", "cpu", "latency", "rss")


async def run(args: argparse.Namespace) -> None:
    quick: bool = args.quick
    phases = [p.strip() for p in args.only.split(",")] if args.only else list(PHASES)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"python {platform.python_version()}, cpus {cpus}, {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f}, shape {args.shape}"
        + (", --quick" if quick else "")
    )
    for phase in phases:
        if phase == "calls":
            lines = await measure_calls(400 if quick else 2000, 200.0, args.shape)
        elif phase == "cpu":
            n, d = (4, 200) if quick else (20, 1000)
            lines = await measure_cpu(n, d, 500.0, args.shape, args.profile)
        elif phase == "latency":
            lines = await measure_latency(20 if quick else 200, args.shape)
        elif phase == "rss":
            known, cap, streaming, seconds = (100, 10, 10, 5.0) if quick else (1000, 50, 50, 20.0)
            lines = await measure_rss(known, cap, streaming, seconds)
        else:
            raise SystemExit(f"unknown phase {phase!r}; choose from {', '.join(PHASES)}")
        print("\n".join(lines), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small numbers: a smoke run")
    parser.add_argument("--only", help=f"comma-separated phases of {', '.join(PHASES)}")
    parser.add_argument(
        "--shape", choices=("delta", "snapshot"), default="delta", help="message_update shape"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the cpu phase")
    anyio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    main()

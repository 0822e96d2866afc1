"""Many Slack threads streaming long answers at once, against Slack's rate limits.

The real stack from Socket Mode to the Web API: the project's fake Slack
(`tests/support/fake_slack.py`, on 127.0.0.1, with `enforce_limits=True`: a 429 for any
call beyond its method's documented budget, tests/support/fake_slack_limits.py: a
`chat.update` of a message within 1 s of its last one or beyond the workspace's Tier 3
budget, `chat.postMessage` beyond 1 per second per channel with a burst of 3, the stream
methods beyond their tiers)
→ slack-bolt over Socket Mode → `slack_intake` → `Bridge` (sqlite store in a temporary
directory) with the production `SlackAdapter` and its production `PlatformLimits` →
stand-in agents (`bench/standin_stream_agent.py`, one process each) → the outbox → the
Web API of the same fake.

Each thread is started by an `app_mention` whose text asks the stand-in for a long
answer with sequence markers (`marks=1`): delta n is the text `d<n> `, and the
stand-in writes the monotonic time it wrote each delta to a stamps file (read back
with its `read_emits`; its `MARK` finds the markers in a call's text). The fake
notes the monotonic time each call arrived, so the delay of delta n is the arrival of
the first accepted `chat.postMessage` / `chat.update` of that thread whose text
shows `d<n>` (or a later marker: the text only grows) minus its emit time. On Linux
`time.monotonic()` is the system-wide CLOCK_MONOTONIC, so the clocks agree.

Printed per case (threads spread over `--channels` channels): the 429s the fake
answered (the goal is none), Web API calls by method, the outbox's counters, the
delta → visible delay (p50, p99, max) and the CPU time of this process (bridge,
bolt and fake together; the agents are other processes).

Each case runs once per streaming path (`--paths stream,edit`, both by default, one
after the other on the same load): Slack's native streams (`chat.startStream` /
`appendStream` / `stopStream`, which the fake limits to their documented tiers: Tier 2,
20 a minute, for start and stop; Tier 4, 100 a minute, for appends) and edits of a
posted message. A streamed marker is visible when the start or append carrying it is
accepted.

Run from the repository root: `.venv/bin/python -m bench.slack_load [--threads 5,20,50]
[--deltas 2000] [--rate 100] [--channels 50,1] [--paths stream,edit] [--json]`.
`--threads` and `--channels` take comma-separated lists and run one case per pair
(default: one channel per thread).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if __package__ in (None, ""):
    # Run as a script: measure this checkout, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.slack.adapter import SlackAdapter
from adapters.slack.convert import thread_key
from adapters.slack.runner import PREFIXES, build_client, slack_intake
from adapters.slack.settings import SlackSettings
from bench.standin_stream_agent import MARK, read_emits
from bridge.options import AgentOptions, BridgeOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.fake_slack import ALICE, TEAM, FakeSlack, Posted

if TYPE_CHECKING:
    from tests.support.fake_slack import Call

STANDIN = Path(__file__).resolve().parent / "standin_stream_agent.py"
# slack_sdk ignores NO_PROXY (docs/design.md, "Platform libraries"): a proxy variable
# would send 127.0.0.1 away.
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
VISIBLE = frozenset(
    {"chat.postMessage", "chat.update", "chat.startStream", "chat.appendStream", "chat.stopStream"}
)
POLL = 0.1


@dataclass
class Case:
    threads: int
    channels: int
    deltas: int
    rate: float
    path: str = "edit"  # "stream": Slack's native streams; "edit": post and edit
    wall_s: float = 0.0  # first mention → every answer shown and the outbox empty
    cpu_s: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)
    ratelimited: dict[str, int] = field(default_factory=dict)
    outbox: dict[str, Any] = field(default_factory=dict)
    delays_measured: int = 0
    delays_missing: int = 0
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    max_ms: float = math.nan
    # Per call, the age of the oldest delta already emitted but not in the call's text
    # (0 when none is missing). Queued edits take in new text while they wait, so this
    # is how far the bridge's text lags its agents (reading, the renderer's own pacing
    # of edits), not the outbox's waiting.
    lag_p50_ms: float = math.nan
    lag_p99_ms: float = math.nan
    lag_max_ms: float = math.nan
    end_p50_s: float = math.nan  # last delta emitted → whole answer shown
    end_max_s: float = math.nan
    left_behind: int = 0  # stand-in processes still alive after the bridge stopped


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of values ≤ it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else math.nan


def channel_name(n: int) -> str:
    return f"C0LOAD{n:04d}"


async def run_case(case: Case, within: float) -> Case:
    for name in PROXY_VARS:
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="slack-load-") as tmp:
        data_dir = Path(tmp)
        stamps = data_dir / "stamps.txt"
        # -I -S: the stand-in needs only the standard library; skipping site makes each
        # of the spawns cheaper.
        argv = (sys.executable, "-I", "-S", str(STANDIN), "--stamps", str(stamps))
        options = BridgeOptions(
            data_dir=data_dir,
            agent=AgentOptions(argv=argv, env={"PATH": os.environ.get("PATH", "")}),
            allowed_users=frozenset({ALICE}),
            max_agents=case.threads + 4,
            # Every thread is Alice's: no per-person cap on live agents, as for 50 people.
            max_per_user=case.threads + 4,
            drain_timeout=5.0,
            inbox_size=1024,
        )
        store = await open_store("sqlite", data_dir)
        try:
            async with FakeSlack(enforce_limits=True) as slack:
                roots = await _drive(case, slack, store, options, within)
                calls, limited = list(slack.calls), {id(c) for c in slack.limited}
                threads = {str(m.ts): m.thread_ts for m in slack.messages.values()}
        finally:
            await store.aclose()
        case.left_behind = _standins_alive(str(stamps))
        _analyse(case, roots, calls, limited, threads, read_emits(stamps))
    return case


async def _drive(
    case: Case, slack: FakeSlack, store: Any, options: BridgeOptions, within: float
) -> dict[str, str]:
    """Start the threads, wait until every answer is shown; run id → thread root ts."""
    settings = SlackSettings(
        bot_token=slack.bot_token, app_token=slack.app_token, api_base_url=slack.base_url
    )
    # The production limits; the path as `[slack] streaming` would choose it.
    adapter = SlackAdapter(build_client(settings), stream=case.path == "stream")

    async def owns(key: str) -> bool:
        return await store.get_conversation(key) is not None

    async with (
        Bridge(adapter, store, options, prefixes=PREFIXES) as bridge,
        slack_intake(settings, bridge, adapter, owns),
    ):
        cpu0, wall0 = time.process_time(), time.monotonic()
        roots: dict[str, str] = {}  # run id → thread root ts
        keys: list[str] = []
        for i in range(case.threads):
            channel = channel_name(i % case.channels)
            text = f"bench id=t{i} deltas={case.deltas} rate={case.rate:g} marks=1"
            envelope = await slack.mention(text, channel=channel)
            roots[f"t{i}"] = root = envelope["payload"]["event"]["ts"]
            keys.append(thread_key(TEAM, channel, root))

        def ended() -> bool:
            shown = {
                m.thread_ts
                for m in slack.messages.values()
                if not m.deleted and "[end " in m.visible and not m.streaming
            }
            return all(root in shown for root in roots.values())

        def busy() -> bool:
            conversations = bridge.supervisor.conversations
            return any(c is not None and c.busy for c in map(conversations.get, keys))

        with anyio.fail_after(within):
            while not ended() or busy():  # noqa: ASYNC110 (polls the fake's state)
                await anyio.sleep(POLL)
            await bridge.outbox.flush()  # the runs' status edits ("done") too
        case.wall_s = time.monotonic() - wall0
        case.cpu_s = time.process_time() - cpu0
        stats = bridge.outbox.stats
        case.outbox = {
            "calls": dict(stats.calls),
            "retries": stats.retries,
            "rate_limited": stats.rate_limited,
            "coalesced": stats.coalesced,
            "deferred": stats.deferred,
            "dropped": stats.dropped,
            "failures": stats.failures,
        }
        case.calls = dict(Counter(c.method for c in slack.calls))
        case.ratelimited = dict(Counter(c.method for c in slack.limited))
    return roots


def _visible(call: Call) -> str:
    if "Stream" in call.method:  # what the call adds to the stream: its markdown chunks
        chunks = call.args.get("chunks") or []
        parsed = json.loads(chunks) if isinstance(chunks, str) else list(chunks)
        text = [str(c.get("text") or "") for c in parsed if c.get("type") == "markdown_text"]
        return str(call.args.get("markdown_text") or "") + "".join(text)
    blocks = call.args.get("blocks") or []
    parsed = json.loads(blocks) if isinstance(blocks, str) else list(blocks)
    return Posted("", "", str(call.args.get("text") or ""), parsed).visible


def _analyse(
    case: Case,
    roots: dict[str, str],
    calls: list[Call],
    limited: set[int],
    thread_of_ts: dict[str, str | None],
    emits: dict[str, list[float]],
) -> None:
    run_of_root = {root: run for run, root in roots.items()}
    shown_at: dict[str, list[float]] = {run: [] for run in roots}  # run → time d1, d2 … shown
    lags: list[float] = []
    for call in sorted(calls, key=lambda c: c.at):
        if call.method not in VISIBLE or id(call) in limited:
            continue
        if call.method in ("chat.postMessage", "chat.startStream"):
            root = call.args.get("thread_ts")
        else:
            root = thread_of_ts.get(str(call.args.get("ts")))
        run = run_of_root.get(str(root))
        if run is None:
            continue
        marks = [int(n) for n in MARK.findall(_visible(call))]
        newest = max(marks, default=0)
        seen = shown_at[run]
        emitted = emits.get(run, [])
        if marks:
            missing = emitted[newest] if newest < len(emitted) else math.inf
            lags.append(max(0.0, call.at - missing))
        # Everything up to the newest marker shows now (the answer only grows).
        seen.extend([call.at] * max(0, newest - len(seen)))
    delays: list[float] = []
    ends: list[float] = []
    for run, emitted in emits.items():
        seen = shown_at.get(run, [])
        delays.extend(shown - sent for shown, sent in zip(seen, emitted, strict=False))
        case.delays_missing += max(0, len(emitted) - len(seen))
        if emitted and len(seen) >= len(emitted):
            ends.append(seen[len(emitted) - 1] - emitted[-1])
    case.delays_missing += case.deltas * (len(roots) - len(emits))
    case.delays_measured = len(delays)
    case.p50_ms = percentile(delays, 50) * 1000
    case.p99_ms = percentile(delays, 99) * 1000
    case.max_ms = max(delays, default=math.nan) * 1000
    case.lag_p50_ms = percentile(lags, 50) * 1000
    case.lag_p99_ms = percentile(lags, 99) * 1000
    case.lag_max_ms = max(lags, default=math.nan) * 1000
    case.end_p50_s = percentile(ends, 50)
    case.end_max_s = max(ends, default=math.nan)


def _standins_alive(marker: str) -> int:
    """Stand-in processes of this case still running (their argv names its stamps file)."""
    alive = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        alive += marker.encode() in cmdline
    return alive


def report(case: Case) -> list[str]:
    limited = sum(case.ratelimited.values())
    per_method = ", ".join(f"{m} {n}" for m, n in sorted(case.calls.items()))
    box = case.outbox
    return [
        f"{case.threads} threads in {case.channels} channel(s), {case.deltas} deltas each at "
        f"{case.rate:g}/s ({case.deltas / case.rate:g} s), answers by "
        f"{'native streams' if case.path == 'stream' else 'edits'}",
        f"   429s from the fake: {limited} {case.ratelimited or ''}"
        f"→ {'PASS' if limited == 0 else 'FAIL'} (goal 0)",
        f"   Web API calls: {per_method}",
        f"   outbox: calls {box.get('calls')}, retries {box.get('retries')}, rate_limited "
        f"{box.get('rate_limited')}, coalesced {box.get('coalesced')}, deferred "
        f"{box.get('deferred')}, dropped "
        f"{box.get('dropped')}, failures {box.get('failures')}",
        f"   delta → visible: n {case.delays_measured} (missing {case.delays_missing}), "
        f"p50 {case.p50_ms:.0f} ms, p99 {case.p99_ms:.0f} ms, max {case.max_ms:.0f} ms",
        f"   text staleness (age of the oldest emitted delta a call lacks): p50 "
        f"{case.lag_p50_ms:.0f} ms, p99 {case.lag_p99_ms:.0f} ms, max {case.lag_max_ms:.0f} ms",
        f"   last delta → whole answer shown: p50 {case.end_p50_s:.2f} s, "
        f"max {case.end_max_s:.2f} s",
        f"   wall {case.wall_s:.1f} s, CPU of this process (bridge + bolt + fake) "
        f"{case.cpu_s:.1f} s; stand-ins left running: {case.left_behind}",
    ]


async def run(args: argparse.Namespace) -> None:
    threads = [int(n) for n in str(args.threads).split(",")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    header = (
        f"python {platform.python_version()}, cpus {cpus}, {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if not args.json:
        print(header, flush=True)
    cases = []
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    for count, channels in [(n, c) for n in threads for c in _ints(args.channels) or [n]]:
        for path in paths:
            case = Case(count, max(1, min(channels, count)), args.deltas, args.rate, path)
            await run_case(case, args.timeout)
            cases.append(case)
            if not args.json:
                print("\n".join(report(case)), flush=True)
        if len(paths) == 2 and not args.json:
            native, edit = cases[-2], cases[-1]
            print(
                f"   {native.path}/{edit.path}: delta → visible p50 "
                f"{_ratio(native.p50_ms, edit.p50_ms)}, p99 {_ratio(native.p99_ms, edit.p99_ms)}; "
                f"whole answer shown p50 {_ratio(native.end_p50_s, edit.end_p50_s)}",
                flush=True,
            )
    if args.json:
        print(json.dumps({"env": header, "cases": [asdict(c) for c in cases]}, indent=2))


def _ints(text: str | None) -> list[int]:
    return [int(n) for n in text.split(",")] if text else []


def _ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}" if y and not math.isnan(x) and not math.isnan(y) else "n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--threads",
        default="50",
        help="threads streaming at once; a comma-separated list: one case each",
    )
    parser.add_argument("--deltas", type=int, default=2000, help="text deltas per answer")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas per second per agent")
    parser.add_argument(
        "--channels", help="comma-separated channel counts, one case each (default: --threads)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per case at most")
    parser.add_argument("--paths", default="stream,edit", help="streaming paths: stream, edit")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    anyio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    main()

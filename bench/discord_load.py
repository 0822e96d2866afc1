"""Many Discord threads streaming long answers at once: 429s, calls and visible-text delay.

The real path end to end: the project's fake Discord (`tests/support/fake_discord.py`, REST
API v10 and the gateway on 127.0.0.1, with `enforce_limits=True`: the rate-limit headers
discord.py paces by, and a 429 past a route's bucket, e.g. 5 message creates or 5 edits
per 5 s per channel, or past the global 50 requests a second) in a thread of its own, so
its arrival times do not wait for the bridge's event loop; the real discord.py through
the adapter's runner (`adapters.discord.runner.serve`: gateway, intake, slash commands,
typing indicator); a real `Bridge` (sqlite store in a temporary directory) with the
production `DiscordAdapter` and its `PlatformLimits`; and one stand-in agent process per
thread (`bench/standin_stream_agent.py` with `marks=1`: delta n is the marker `d<n> `,
and the agent appends the time it wrote each one to a stamps file).

Each thread starts as a person's mention of the bot in a text channel, all at the same
moment; the runner opens a thread from each mention, and the thread is the conversation.
The threads are spread over `--channels` text channels (one case per entry; by default one
channel per thread, then all in one channel). Each agent streams `--deltas` markers at
`--rate` per second, about 10,900 characters for 2000: six Discord messages of at most
2,000 characters per answer. Measured per case:

- 429s the fake answered: those discord.py waited out and retried itself (handled), and
  those that reached the bridge's outbox as `RateLimited` (unhandled; the goal is none),
  with how many were over the global limit rather than a route's bucket;
- REST calls by kind (message create and edit, reaction, typing, thread create, …);
- delay from a delta's write by the agent (`time.monotonic()`, on Linux the system-wide
  CLOCK_MONOTONIC, so comparable with the fake's clock) to the arrival of the first
  accepted message create or edit in its thread whose text shows it (or a later marker:
  the answer only grows): p50, p99 and max over all deltas of all threads;
- how many answers split cleanly (the thread's messages, in order, show every marker
  exactly once), and the time from the agent's last delta to the whole answer shown;
- the CPU time of this process (bridge, discord.py and the fake's thread).

Run from the repository root: `.venv/bin/python bench/discord_load.py [--threads 50]
[--deltas 2000] [--rate 100] [--channels 50,1] [--json]`. It exits 1 if a 429 reached the
outbox. Everything listens on 127.0.0.1 only, and every process started is stopped before
the bench returns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

if __package__ in (None, ""):
    # Run as a script: measure this checkout, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.discord.convert import KEY_PREFIX, thread_key
from adapters.discord.runner import make_client, serve
from adapters.discord.settings import DiscordSettings
from bench.standin_stream_agent import MARK, read_emits
from bridge.options import AgentOptions, BridgeOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.fake_discord import ALICE, GENERAL, GUILD_ID, TOKEN, Channel, FakeDiscord
from tests.support.fake_discord_checks import ApiError
from tests.support.fake_discord_limits import RateLimits
from tests.support.fake_discord_model import GUILD_TEXT

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from bridge.platform import Adapter
    from bridge.store.base import Store
    from tests.support.fake_discord import Call

T = TypeVar("T")
STANDIN = Path(__file__).resolve().parent / "standin_stream_agent.py"
POLL = 0.1
GUILD_READY = 0.05  # s discord.py waits after the last GUILD_CREATE (2 s by default)
_KINDS = (
    ("message create", re.compile(r"^POST /channels/\d+/messages$")),
    ("message edit", re.compile(r"^PATCH /channels/\d+/messages/\d+$")),
    ("reaction", re.compile(r"^(PUT|DELETE) /channels/\d+/messages/\d+/reactions/")),
    ("typing", re.compile(r"^POST /channels/\d+/typing$")),
    ("thread create", re.compile(r"^POST /channels/\d+/(messages/\d+/)?threads$")),
    ("interaction", re.compile(r"^(POST|PATCH) /(interactions|webhooks)/")),
)
_POSTED = re.compile(r"^/channels/(\d+)/messages(/\d+)?$")


# --- the fake Discord in its own thread -------------------------------------------------------


class GlobalCounted(RateLimits):
    """The fake's rate limits, counting the calls refused by the global limit."""

    refused_global = 0

    def _admit_global(self) -> None:
        try:
            super()._admit_global()
        except ApiError:
            self.refused_global += 1
            raise


class FakeThread:
    """`FakeDiscord` serving from its own event loop in a thread; the bench reaches into
    it only through `call`, which runs a coroutine on that loop."""

    def __init__(self, channels: int) -> None:
        self.channels = channels
        self.fake: FakeDiscord | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="fake-discord", daemon=True)

    def __enter__(self) -> FakeThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or self.fake is None:
            raise RuntimeError("the fake Discord did not start") from self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - raised again by the caller
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        # discord.py is pointed at the fake by the runner (api_url), as in production.
        async with FakeDiscord(enforce_limits=True, point_discord=False) as fake:
            fake.rate_limits = GlobalCounted(fake.clock)
            for n in range(self.channels - 1):  # GENERAL is the first
                channel = Channel(fake.snowflake(), GUILD_TEXT, f"load-{n}", position=3 + n)
                fake.channels[channel.id] = channel
            self.fake = fake
            self._ready.set()
            await self._stop.wait()

    async def call(self, fn: Callable[[FakeDiscord], Awaitable[T]]) -> T:
        """`await fn(fake)` on the fake's loop, from the bench's loop."""
        loop, fake = self._loop, self.fake
        if loop is None or fake is None:
            raise RuntimeError("the fake is not running")
        done = asyncio.run_coroutine_threadsafe(_awaited(fn(fake)), loop)
        return await asyncio.wrap_future(done)

    async def read(self, fn: Callable[[FakeDiscord], T]) -> T:
        """`fn(fake)`, a plain read, on the fake's loop (never while it changes)."""

        async def reading(fake: FakeDiscord) -> T:
            return fn(fake)

        return await self.call(reading)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def text_channels(fake: FakeDiscord) -> list[int]:
    """GENERAL, then the channels the bench added, in order."""
    added = sorted(
        (c for c in fake.channels.values() if c.name.startswith("load-")), key=lambda c: c.position
    )
    return [GENERAL, *(c.id for c in added)]


# --- the bench ---------------------------------------------------------------------------------


@dataclass
class Case:
    threads: int
    channels: int
    deltas: int
    rate: float
    started: float = 0.0  # monotonic time of the first mention
    wall_s: float = 0.0  # first mention → every answer shown and the outbox empty
    shown_s: float = math.nan  # first mention → the last answer shown whole
    marked_s: float = math.nan  # first mention → the last reaction call (the runs' ✅)
    cpu_s: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)
    limited: dict[str, int] = field(default_factory=dict)  # 429s the fake answered, by kind
    limited_global: int = 0  # … of them over the global 50/s rather than a route's bucket
    outbox: dict[str, Any] = field(default_factory=dict)
    delays_measured: int = 0
    delays_missing: int = 0
    p50_s: float = math.nan
    p99_s: float = math.nan
    max_s: float = math.nan
    end_p50_s: float = math.nan  # last delta written → whole answer shown
    end_max_s: float = math.nan
    clean_splits: int = 0
    answer_messages: int = 0
    left_behind: int = 0  # stand-in processes still alive after the bridge stopped

    @property
    def unhandled(self) -> int:
        """429s that reached the outbox (discord.py gave up waiting them out)."""
        return int(self.outbox.get("rate_limited") or 0)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q% of the values ≤ it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else math.nan


def bench_options(data_dir: Path, stamps: Path, threads: int) -> BridgeOptions:
    # -I -S: the stand-in needs only the standard library; skipping site makes each of
    # the spawns cheaper.
    argv = (sys.executable, "-I", "-S", str(STANDIN), "--stamps", str(stamps))
    return BridgeOptions(
        data_dir=data_dir,
        agent=AgentOptions(argv=argv, env={"PATH": os.environ.get("PATH", "")}),
        allowed_users=frozenset({str(ALICE.id)}),
        key_prefix=KEY_PREFIX,
        max_agents=threads + 4,
        # Every thread is Alice's: no per-person cap on live agents, as for 50 people.
        max_per_user=threads + 4,
        drain_timeout=5.0,
        inbox_size=1024,
    )


async def run_case(case: Case, within: float) -> Case:
    with tempfile.TemporaryDirectory(prefix="discord-load-") as tmp, FakeThread(case.channels) as f:
        data_dir = Path(tmp)
        stamps = data_dir / "stamps.txt"
        store = await open_store("sqlite", data_dir)
        try:
            options = bench_options(data_dir, stamps, case.threads)
            runs = await _serve_and_drive(case, f, store, options, within)
        finally:
            await store.aclose()
        case.left_behind = _standins_alive(str(stamps))
        calls = await f.read(lambda fake: list(fake.calls))
        finals = await f.read(lambda fake: {r: _final_texts(fake, t) for r, t in runs.items()})
        case.limited_global = await f.read(_refused_global)
        emits = read_emits(stamps)
    _count(case, calls)
    _analyse(case, runs, calls, emits)
    _splits(case, finals)
    return case


async def _serve_and_drive(
    case: Case, f: FakeThread, store: Store, options: BridgeOptions, within: float
) -> dict[str, int]:
    """The runner serving the bridge on the fake while the threads stream; run id →
    its thread's channel id."""
    api_url = await f.read(lambda fake: fake.api_url)
    settings = DiscordSettings(token=TOKEN, allowed_users=options.allowed_users, api_url=api_url)
    bridges: list[Bridge] = []

    @contextlib.asynccontextmanager
    async def bridge_for(adapter: Adapter, name: str) -> AsyncIterator[Bridge]:
        async with Bridge(adapter, store, options, bot_name=name) as bridge:
            bridges.append(bridge)
            yield bridge

    stop = anyio.Event()
    client = make_client(settings, guild_ready_timeout=GUILD_READY)
    runs: dict[str, int] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(settings, bridge_for, store, stop=stop, client=client))
        try:
            await f.call(lambda fake: fake.wait_for(lambda: fake.commands.get(None), 60))
            await f.call(lambda fake: fake.connected())
            runs = await _drive(case, f, bridges[0], within)
        finally:
            stop.set()  # the bridge drains its runs and the outbox before `serve` returns
    return runs


async def _drive(case: Case, f: FakeThread, bridge: Bridge, within: float) -> dict[str, int]:
    """Mention the bot once per thread at the same moment; wait until every answer is
    shown whole and the outbox is empty."""
    channels = (await f.read(text_channels))[: case.channels]
    cpu0, wall0 = time.process_time(), time.monotonic()
    case.started = wall0

    async def mention(fake: FakeDiscord, i: int) -> int:
        text = f"bench id=t{i} deltas={case.deltas} rate={case.rate:g} marks=1"
        return (await fake.user_says(channels[i % len(channels)], text, mentions_bot=True)).id

    async def mention_all(fake: FakeDiscord) -> dict[str, int]:
        # A thread opened from a message has the message's id.
        return {f"t{i}": await mention(fake, i) for i in range(case.threads)}

    runs = await f.call(mention_all)
    keys = [
        thread_key(str(GUILD_ID), str(channels[i % len(channels)]), str(runs[f"t{i}"]))
        for i in range(case.threads)
    ]

    def busy() -> bool:
        conversations = bridge.supervisor.conversations
        return any(c is not None and c.busy for c in map(conversations.get, keys))

    with anyio.fail_after(within):
        while not await f.read(lambda fake: _all_ended(fake, runs)) or busy():  # noqa: ASYNC110
            await anyio.sleep(POLL)  # (polls the fake's state, in its thread)
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
    return runs


def _end_line(run: str) -> str:
    return f"[end {run}]"  # the stand-in's last line of the answer of `run`


def _all_ended(fake: FakeDiscord, runs: dict[str, int]) -> bool:
    return all(
        any(_end_line(run) in m.content.replace("\\", "") for m in fake.bot_messages(thread))
        for run, thread in runs.items()
    )


def _final_texts(fake: FakeDiscord, thread: int) -> list[str]:
    """The thread's answer messages as they read now, in order."""
    return [m.content for m in fake.bot_messages(thread) if MARK.search(m.content)]


def _refused_global(fake: FakeDiscord) -> int:
    limits = fake.rate_limits
    return limits.refused_global if isinstance(limits, GlobalCounted) else 0


def kind_of(call: Call) -> str:
    line = f"{call.method} {call.path}"
    return next((kind for kind, route in _KINDS if route.match(line)), "other")


def _count(case: Case, calls: list[Call]) -> None:
    case.calls = dict(Counter(kind_of(c) for c in calls))
    case.limited = dict(Counter(kind_of(c) for c in calls if c.status == 429))
    reactions = [c.at for c in calls if kind_of(c) == "reaction" and c.status < 300]
    case.marked_s = max(reactions, default=math.nan) - case.started


def _shown_marks(call: Call) -> tuple[int, list[int]] | None:
    """(channel, markers in the text) of an accepted message create or edit."""
    posted = _POSTED.match(call.path)
    if posted is None or call.method not in ("POST", "PATCH") or call.status != 200:
        return None
    content = str((call.json or {}).get("content") or "")
    return int(posted[1]), [int(n) for n in MARK.findall(content)]


def _analyse(
    case: Case, runs: dict[str, int], calls: list[Call], emits: dict[str, list[float]]
) -> None:
    run_of_thread = {thread: run for run, thread in runs.items()}
    shown_at: dict[str, list[float]] = {run: [] for run in runs}  # run → when d1, d2 … showed
    for call in sorted(calls, key=lambda c: c.at):
        shown = _shown_marks(call)
        run = run_of_thread.get(shown[0]) if shown is not None else None
        if shown is None or run is None or not shown[1]:
            continue
        seen = shown_at[run]
        # Everything up to the newest marker shows now: the answer only grows, and its
        # messages go out in order.
        seen.extend([call.at] * max(0, max(shown[1]) - len(seen)))
    delays: list[float] = []
    ends: list[float] = []
    whole: list[float] = []  # when each answer showed whole
    for run, emitted in emits.items():
        seen = shown_at.get(run, [])
        delays.extend(shown - sent for shown, sent in zip(seen, emitted, strict=False))
        case.delays_missing += max(0, len(emitted) - len(seen))
        if emitted and len(seen) >= len(emitted):
            ends.append(seen[len(emitted) - 1] - emitted[-1])
            whole.append(seen[len(emitted) - 1])
    case.delays_missing += case.deltas * (len(runs) - len(emits))
    case.delays_measured = len(delays)
    case.p50_s, case.p99_s = percentile(delays, 50), percentile(delays, 99)
    case.max_s = max(delays, default=math.nan)
    case.end_p50_s, case.end_max_s = percentile(ends, 50), max(ends, default=math.nan)
    case.shown_s = max(whole, default=math.nan) - case.started


def _splits(case: Case, finals: dict[str, list[str]]) -> None:
    """Each thread's messages, in order, show every marker once: none cut or lost."""
    for texts in finals.values():
        case.answer_messages += len(texts)
        marks = [int(n) for text in texts for n in MARK.findall(text)]
        case.clean_splits += marks == list(range(1, case.deltas + 1))


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


# --- output ------------------------------------------------------------------------------------


def report(case: Case) -> list[str]:
    handled = sum(case.limited.values()) - case.unhandled
    box = case.outbox
    calls = ", ".join(f"{kind} {n}" for kind, n in sorted(case.calls.items()))
    return [
        f"{case.threads} threads in {case.channels} channel(s), {case.deltas} deltas each at "
        f"{case.rate:g}/s ({case.deltas / case.rate:g} s)",
        f"   429s from the fake: {sum(case.limited.values())} {case.limited or ''} "
        f"(over the global limit: {case.limited_global}); waited out by discord.py: "
        f"{handled}; reached the outbox: {case.unhandled} "
        f"→ {'PASS' if case.unhandled == 0 else 'FAIL'} (goal 0)",
        f"   REST calls: {sum(case.calls.values())}: {calls}",
        f"   outbox: calls {box.get('calls')}, retries {box.get('retries')}, coalesced "
        f"{box.get('coalesced')}, deferred {box.get('deferred')}, dropped {box.get('dropped')}, "
        f"failures {box.get('failures')}",
        f"   delta → visible: n {case.delays_measured} (missing {case.delays_missing}), "
        f"p50 {case.p50_s:.2f} s, p99 {case.p99_s:.2f} s, max {case.max_s:.2f} s",
        f"   last delta → whole answer shown: p50 {case.end_p50_s:.2f} s, "
        f"max {case.end_max_s:.2f} s",
        f"   answers split cleanly: {case.clean_splits} of {case.threads} "
        f"({case.answer_messages} messages hold answer text)",
        f"   after the first mention: last answer shown whole {case.shown_s:.1f} s, last "
        f"reaction {case.marked_s:.1f} s, outbox empty (answers complete) {case.wall_s:.1f} s",
        f"   CPU of this process (bridge, discord.py, fake) {case.cpu_s:.1f} s; stand-ins left "
        f"running: {case.left_behind}",
    ]


async def run(args: argparse.Namespace) -> list[Case]:
    counts = [int(n) for n in args.channels.split(",")] if args.channels else [args.threads, 1]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    header = (
        f"python {platform.python_version()}, cpus {cpus}, {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if not args.json:
        print(header, flush=True)
    cases = []
    for channels in counts:
        case = Case(args.threads, max(1, min(channels, args.threads)), args.deltas, args.rate)
        cases.append(await run_case(case, args.timeout))
        if not args.json:
            print("\n".join(report(case)), flush=True)
    if args.json:
        print(json.dumps({"env": header, "cases": [asdict(c) for c in cases]}, indent=2))
    return cases


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--threads", type=int, default=50, help="threads streaming at once")
    parser.add_argument("--deltas", type=int, default=2000, help="text deltas per answer")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas per second per agent")
    parser.add_argument(
        "--channels",
        help="comma-separated channel counts, one case each (default: --threads, then 1)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case at most")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    cases = anyio.run(run, parser.parse_args(argv))
    if any(case.unhandled for case in cases):
        raise SystemExit(1)


if __name__ == "__main__":
    main()

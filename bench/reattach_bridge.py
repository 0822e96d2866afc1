"""Agent hosts (issue 17), part 3 of `bench/reattach.py`: a whole bridge takes back N
agents that kept streaming while it was away.

A real `Bridge` (sqlite store in a temporary folder, a `RecordingAdapter` with fast
limits, `tests.support.bridge_harness.LIMITS`, in place of a platform) with
`on_stop="detach"`, so every agent starts under a host. The agents are stand-ins
(`bench/standin_stream_agent.py`, started as `bench/pipeline.py` starts them:
`AgentOptions(argv=..., env=...)`, the sandbox off, its default; a sandbox changes how
an agent starts, not how it is taken back). N conversations (a chat each) are each
prompted once; each agent streams `rate` deltas/s (`marks=1`: each delta is its marker
`d<n>`) for longer than the measurement. Once every chat shows streamed text the bridge
is left (it detaches: the agents keep streaming), `away` seconds pass, then a new
`Bridge` on the same store and data dir starts: it finds the hosts through the store
and replays each run through its conversation's renderer, from the run's start (a run
that has not ended counts as not shown yet), what was written meanwhile included.

Runs of several ages (`ages`, seconds): a run `age` s old is a stand-in that wrote
`age * rate` deltas at once when prompted (`backlog=`), as a run streaming that long
would have, then goes on at `rate`. The first bridge shows them all, and stays until
its snapshots of what each run has shown (bridge/rpc/shown.py) have been taken
(`SHOWN_EVERY` + 1 s after every chat shows its backlog's last delta), so the new
bridge replays each run from its snapshot plus what followed it (at most `SHOWN_EVERY`
s of deltas, and the `away` s). With `snapshots=False` none is ever taken (as before
issue 34): the new bridge replays each run from its start.

Timed from just before the new bridge's `__aenter__` (t0) to each chat's first send or
edit that the platform accepted after t0, and to its catching up: the first accepted
call whose text shows the marker of the last delta its agent wrote before t0 (from the
stamps each agent writes when its run ends). Prints p50 and max of both, and the time
until all N chats have had their first call (goal, issue 17: under 2 s). Also counted:
the chats where a message showed fewer deltas on the way than before t0 (the replay's
first edits), and the warnings and errors logged meanwhile.

The new bridge stays `lead` seconds after the last first call, then detaches too; then
`hosting.stop_all(store)` (in a `finally`) ends every host, which ends its agent. Last,
every process whose command line names this run's temporary folder (hosts, keepers,
stand-ins) must be gone: any left is reported and gets SIGTERM.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bench.standin_stream_agent import MARK, read_emits
from bridge.conversation import hosts
from bridge.conversation.hosts import stop_all
from bridge.model import ChatRef, Inbound, MessageRef, Sender
from bridge.options import AgentOptions, BridgeOptions
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.bridge_harness import LIMITS
from tests.support.recording_adapter import Call, RecordingAdapter

if TYPE_CHECKING:
    from bridge.store.base import Store

STANDIN = Path(__file__).resolve().parent / "standin_stream_agent.py"
SENDER = Sender("42", "bench")
POLL = 0.005
WAIT = 120.0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of values ≤ it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def processes_naming(folder: Path) -> set[int]:
    """Processes (not this one) whose command line names `folder`."""
    ours, found = str(folder).encode(), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if ours in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


class Watcher(RecordingAdapter):
    """The recording adapter, noting per chat the first accepted send or edit that shows
    a delta marker, the highest marker shown before `since`, and the first accepted
    send or edit after `since`."""

    def __init__(self) -> None:
        super().__init__(LIMITS)
        self.since = math.inf
        self.streaming: set[str] = set()  # chats that showed a marker
        self.top: dict[str, int] = {}  # chat id → the highest marker shown before `since`
        self.first: dict[str, Call] = {}  # chat id → its first call after `since`

    def _record(self, call: Call) -> None:
        super()._record(call)
        if not call.ok or call.kind not in ("send", "edit") or call.chat is None:
            return
        chat = call.chat.chat_id
        if call.at >= self.since:
            self.first.setdefault(chat, call)
        else:
            tail = call.text[-200:]  # the newest markers are last
            marks = [int(m) for m in MARK.findall(tail)]
            if marks:
                self.streaming.add(chat)
                self.top[chat] = max(self.top.get(chat, 0), *marks)


class TakenBack(logging.Handler):
    """The conversations taken back from a snapshot, with the records each one held."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if str(record.msg).startswith("%s: taken back from a snapshot") and args:
            assert isinstance(args, tuple)
            self.records.append(int(str(args[1])))


class Problems(logging.Handler):
    """Warnings and errors logged during the run, counted by their first line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        first = record.getMessage().splitlines()[0] if record.getMessage() else ""
        self.seen[f"{record.levelname} {record.name}: {first[:140]}"] += 1


async def settle_processes(folder: Path) -> list[int]:
    """Wait for the processes naming `folder` to end; SIGTERM those still there after
    15 s (a host ends its agent within about 3 s of its SIGTERM). The pids signalled."""
    with anyio.move_on_after(15):
        while processes_naming(folder):  # noqa: ASYNC110 (a process's end sets no event of ours)
            await anyio.sleep(0.1)
    left = sorted(processes_naming(folder))
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    with anyio.move_on_after(5):
        while processes_naming(folder):  # noqa: ASYNC110
            await anyio.sleep(0.1)
    return left


async def measure_bridge(
    count: int,
    rate: float,
    away: float,
    lead: float,
    ages: tuple[float, ...] = (0.0,),
    *,
    snapshots: bool = True,
) -> None:
    for age in ages:
        await measure_age(count, rate, away, lead, age, snapshots=snapshots)


async def measure_age(
    count: int, rate: float, away: float, lead: float, age: float, *, snapshots: bool
) -> None:
    print(
        f"3. bridge reattach: {count} conversations, each agent streaming {rate:g} deltas/s "
        f"under a host, its run {age:g} s old ({int(age * rate)} deltas already written); "
        f"the bridge detaches, {away:g} s away, then a new bridge takes them back "
        f"(snapshots {'on' if snapshots else 'off'})",
        flush=True,
    )
    if not snapshots:  # never due: every take-back replays its run from the start
        hosts.SHOWN_EVERY = hosts.SHOWN_AT_TOOL = math.inf
    problems, taken = Problems(), TakenBack()
    logging.getLogger().addHandler(problems)
    hosts_log = logging.getLogger(hosts.__name__)
    hosts_log.addHandler(taken)
    hosts_log.setLevel(logging.INFO)
    # A short folder: the hosts' unix sockets are in it (108 bytes at most).
    with tempfile.TemporaryDirectory(prefix="rbb-", dir="/tmp") as tmp:
        folder = Path(tmp)
        stopped, left = 0, []
        try:
            store = await open_store("sqlite", folder)
            try:
                run = await reattach_bridge(folder, store, count, rate, away, lead, age)
            finally:
                with anyio.CancelScope(shield=True):
                    stopped = await stop_all(store)
                    await store.aclose()
        finally:
            with anyio.CancelScope(shield=True):
                left = await settle_processes(folder)
            logging.getLogger().removeHandler(problems)
            hosts_log.removeHandler(taken)
            print(f"   end: stop_all ended {stopped} hosts; processes left: {left or 'none'}")
            if taken.records:
                print(
                    f"   taken back from a snapshot: {len(taken.records)} of {count}, "
                    f"median {statistics.median(taken.records):g} records in it"
                )
            print(f"   logged {sum(problems.seen.values()) or 'no'} warnings or errors")
            for line, n in problems.seen.most_common(8):
                print(f"     {n} x {line}")
        # Every run has ended by now: each agent wrote the times of its deltas.
        catch_up(*run)


Run = tuple[Watcher, Path, list[str], float, float]  # for `catch_up`


async def reattach_bridge(
    folder: Path, store: Store, count: int, rate: float, away: float, lead: float, age: float
) -> Run:
    stamps = folder / "stamps.txt"
    # -I -S: the stand-in needs only the standard library. The sandbox is off (default).
    argv = (sys.executable, "-I", "-S", str(STANDIN), "--stamps", str(stamps))
    options = BridgeOptions(
        data_dir=folder,
        agent=AgentOptions(argv=argv, env={"PATH": os.environ.get("PATH", os.defpath)}),
        allowed_users=None,
        max_agents=count + 10,
        max_per_user=count + 10,  # one sender stands for many people here
        drain_timeout=5.0,
        inbox_size=1024,
        on_stop="detach",
    )
    adapter = Watcher()
    chats = [str(i) for i in range(count)]
    backlog = int(age * rate)
    deltas = backlog + int(rate * 600)  # longer than the measurement: streaming at the end
    setup0 = time.monotonic()
    async with Bridge(adapter, store, options) as bridge:
        for chat in chats:
            text = f"bench id=b{chat} deltas={deltas} rate={rate:g} marks=1 backlog={backlog}"
            inbound = Inbound(f"bench:{chat}", ChatRef(chat), SENDER, uuid.uuid4().hex, text=text)
            await bridge.handle(inbound)
        with anyio.fail_after(WAIT + 10 * age):
            while min((adapter.top.get(c, 0) for c in chats), default=0) <= backlog:  # noqa: ASYNC110
                await anyio.sleep(POLL * 10)
        await anyio.sleep(hosts.SHOWN_EVERY + 1 if math.isfinite(hosts.SHOWN_EVERY) else 0)
        setup = time.monotonic() - setup0
        leaving = time.monotonic()
    left = time.monotonic() - leaving
    await anyio.sleep(away)
    bridge = Bridge(adapter, store, options)
    load = os.getloadavg()
    t0 = adapter.since = time.monotonic()
    cpu0 = time.process_time()
    async with bridge:
        entered = time.monotonic() - t0
        with anyio.fail_after(WAIT):
            while len(adapter.first) < count:  # noqa: ASYNC110 (polls the adapter)
                await anyio.sleep(POLL)
        cpu = time.process_time() - cpu0
        await anyio.sleep(lead)
        leaving = time.monotonic()
    attached, left_again = leaving - t0, time.monotonic() - leaving
    print(
        f"   setup: {count} agents started, prompted and shown in {setup:.1f} s; leaving "
        f"(detach) took {left:.2f} s, the second time {left_again:.2f} s; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} when restarting"
    )
    firsts = [adapter.first[chat].at - t0 for chat in chats]
    kinds = Counter(adapter.first[chat].kind for chat in chats)
    ms = 1000
    print(
        f"   Bridge.__aenter__ took {entered * ms:.0f} ms; first new call per chat: "
        f"min {min(firsts) * ms:.0f} ms, p50 {percentile(firsts, 50) * ms:.0f} ms, "
        f"max {max(firsts) * ms:.0f} ms ({', '.join(f'{n} {k}' for k, n in kinds.items())}); "
        f"all {count} have one after {max(firsts) * ms:.0f} ms "
        f"→ {'PASS' if max(firsts) < 2 else 'FAIL'} (goal < 2 s); this process's CPU "
        f"meanwhile {cpu:.2f} s",
        flush=True,
    )
    return adapter, stamps, chats, t0, attached


def catch_up(adapter: Watcher, stamps: Path, chats: list[str], t0: float, attached: float) -> None:
    """Print when each chat showed the last delta its agent wrote before t0 (the agents
    write their stamps when their runs end), and whether a message showed less on the
    way there than it did before t0."""
    emits = read_emits(stamps)
    caught: dict[str, float] = {}
    before: dict[MessageRef | None, int] = {}  # the highest marker a message showed
    rewound: dict[str, int] = {}  # chat → the fewest markers a message fell back to
    backlog = {c: sum(1 for t in emits.get(f"b{c}", []) if t < t0) for c in chats}
    for call in adapter.calls:
        if not call.ok or call.kind not in ("send", "edit") or call.chat is None:
            continue
        chat = call.chat.chat_id
        top = max((int(m) for m in MARK.findall(call.text)), default=0)
        if call.at < t0:
            before[call.ref] = max(before.get(call.ref, 0), top)
        elif chat not in caught:
            if top < before.get(call.ref, 0):
                rewound[chat] = min(rewound.get(chat, top), top)
            if top >= backlog.get(chat, math.inf) > 0:
                caught[chat] = call.at - t0
    got = list(caught.values())
    ms = 1000
    missing = [c for c in chats if c not in caught]
    if got:
        print(
            f"   caught up (the chat shows the last delta written before t0): "
            f"min {min(got) * ms:.0f} ms, p50 {percentile(got, 50) * ms:.0f} ms, "
            f"max {max(got) * ms:.0f} ms; deltas written before t0 (all replayed: the run "
            f"goes on) median {statistics.median(backlog.values()):g}"
            + (f" ({len(missing)} not within {attached:.1f} s)" if missing else ""),
            flush=True,
        )
    else:
        print(f"   caught up: none of {len(chats)} within {attached:.1f} s (stamps: {len(emits)})")
    if rewound:
        print(
            f"   {len(rewound)} of {len(chats)} chats had a message show fewer deltas than "
            f"before t0 on the way (as few as {min(rewound.values())}: the replay's first edits)"
        )

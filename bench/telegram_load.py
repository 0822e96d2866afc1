"""Many Telegram chats streaming long answers at once: 429s, calls and visible-text delay.

The real path end to end: the project's fake Bot API (`tests/support/fake_telegram.py`,
on 127.0.0.1 with `enforce_limits=True`: a 429 for an edit of a private message within
1 s of the last one, or a group's 21st message in a minute) in a thread of its own, so
its timestamps do not wait for the bridge's event loop; the real python-telegram-bot
through `adapters.telegram.serve`; a real `Bridge` (sqlite store in a temporary
directory); and one stand-in agent process per chat (`bench/standin_stream_agent.py`
with `marks=1`: delta n is the marker `d<n> `, and the agent appends the time it wrote
each one to a stamps file shared by all agents).

Every chat is a private chat (positive id) that sends one prompt at the same moment;
each agent streams `--deltas` markers at `--rate` per second, enough text for several
Telegram messages. The same load runs once per streaming path (`--paths draft,edit`,
both by default, one after the other): drafts (`sendMessageDraft`, then the message)
and edits of a sent message; the ratios of the two close the output. Measured per path:

- 429s the fake answered (the goal is none) and the outbox's own count of them;
- platform calls by Bot API method;
- delay from a delta's write by the agent (its `time.monotonic()`; on Linux the
  system-wide CLOCK_MONOTONIC, so comparable with the fake's clock) to the arrival at
  the fake of the first sendMessage/editMessageText/sendMessageDraft that succeeded
  with that marker in its text: p50, p99 and max over all deltas of all chats;
- how many answers split cleanly: the chat's messages, in order, show every marker
  exactly once (no marker cut in two or lost at a cut);
- calls that carried answer text, per chat, and the time from the agent's last delta
  to the arrival of the message (not a draft) that shows the whole answer.

A draft counts as visible: it is on the user's screen, above the input field.

Run from the repository root: `.venv/bin/python bench/telegram_load.py [--chats 50]
[--deltas 2000] [--rate 100] [--json] [--calls-log FILE]` (`--calls-log` writes every
Bot API call's method, chat, message, arrival time and newest marker, to see where
a delay came from). It exits 1 if the fake answered any 429. The stand-ins run as
``python -I -S bench/standin_stream_agent.py`` (standard library only, so 50 spawns
stay cheap). Everything listens on 127.0.0.1 only, and every process started is
stopped before the bench returns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    # Run as a script: measure this checkout, not some installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standin_stream_agent import MARK, read_emits

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine
    from concurrent.futures import Future

    from bridge.options import BridgeOptions
    from bridge.platform import Adapter
    from bridge.service import Bridge
    from tests.support.fake_telegram import FakeTelegram

STANDIN = Path(__file__).resolve().parent / "standin_stream_agent.py"
FIRST_CHAT = 1001  # private chats: positive ids (the fake paces them per message)
POLL = 0.05
LAG_TICK = 0.05
SHUTDOWN = 60.0  # the bridge drains its runs and the outbox before `serve` returns


# --- the fake Bot API in its own thread --------------------------------------------------------


class FakeThread:
    """`FakeTelegram` serving from its own event loop in a thread; the bench reaches
    into it only through `call`, which runs a function on that loop."""

    def __init__(self) -> None:
        self.fake: FakeTelegram | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="fake-telegram", daemon=True)

    def __enter__(self) -> FakeThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or self.fake is None:
            raise RuntimeError("the fake Bot API did not start") from self._error
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
        from tests.support.fake_telegram import FakeTelegram

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with FakeTelegram(enforce_limits=True) as fake:
            self.fake = fake
            self._ready.set()
            await self._stop.wait()

    async def call(self, fn: Callable[[FakeTelegram], Any]) -> Any:
        """`fn(fake)` on the fake's loop, awaited from the bench's loop."""
        loop, fake = self._loop, self.fake
        if loop is None or fake is None:
            raise RuntimeError("the fake is not running")

        async def run() -> Any:
            return fn(fake)

        coro: Coroutine[Any, Any, Any] = run()
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, loop)
        return await asyncio.wrap_future(future)


# --- the bench ---------------------------------------------------------------------------------


@dataclass
class Figures:
    chats: int
    deltas: int
    rate: float
    seconds: float = 0.0  # first prompt → every answer complete
    calls: Counter[str] = field(default_factory=Counter)
    too_many: int = 0
    too_many_by_method: Counter[str] = field(default_factory=Counter)
    outbox_rate_limited: int = 0
    outbox_retries: int = 0
    outbox_coalesced: int = 0
    delays: list[float] = field(default_factory=list)  # seconds, one per delta seen
    cpu: float = 0.0  # this process (bridge, PTB and the fake's thread) while streaming
    lags: list[float] = field(default_factory=list)  # event-loop lag samples, seconds
    unseen: int = 0  # deltas never found in any successful call
    clean_splits: int = 0  # chats whose final messages show every marker once, in order
    answer_messages: int = 0  # chat messages holding answer text, all chats
    answer_calls: int = 0  # successful sends, edits and drafts that carried answer text
    final_delays: list[float] = field(default_factory=list)  # last delta → whole answer sent
    streaming: str = "draft"

    def summary(self) -> dict[str, Any]:
        delays = sorted(self.delays)
        return {
            "chats": self.chats,
            "deltas_per_chat": self.deltas,
            "rate_per_chat": self.rate,
            "wall_seconds": round(self.seconds, 2),
            "calls": dict(sorted(self.calls.items())),
            "calls_total": sum(self.calls.values()),
            "calls_without_getUpdates": sum(self.calls.values()) - self.calls["getUpdates"],
            "fake_429s": self.too_many,
            "fake_429s_by_method": dict(self.too_many_by_method),
            "outbox_rate_limited": self.outbox_rate_limited,
            "outbox_retries": self.outbox_retries,
            "outbox_coalesced": self.outbox_coalesced,
            "deltas_measured": len(delays),
            "deltas_unseen": self.unseen,
            "answers_split_cleanly": self.clean_splits,
            "answer_messages": self.answer_messages,
            "delay_p50_s": round(percentile(delays, 50), 3),
            "delay_p99_s": round(percentile(delays, 99), 3),
            "delay_max_s": round(delays[-1], 3) if delays else math.nan,
            "streaming": self.streaming,
            "answer_calls_per_chat": round(self.answer_calls / max(self.chats, 1), 1),
            "final_p50_s": round(percentile(sorted(self.final_delays), 50), 3),
            "final_max_s": round(max(self.final_delays, default=math.nan), 3),
            "bench_process_cpu_s": round(self.cpu, 2),
            "loop_lag_p99_s": round(percentile(sorted(self.lags), 99), 3),
            "loop_lag_max_s": round(max(self.lags, default=math.nan), 3),
        }


def percentile(ordered: list[float], q: float) -> float:
    """Nearest rank on an already sorted list."""
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


async def run_bench(
    chats: int, deltas: int, rate: float, streaming: str, calls_log: Path | None = None
) -> Figures:
    import anyio

    from adapters.telegram.runner import serve
    from adapters.telegram.settings import TelegramSettings
    from bridge.options import AgentOptions, BridgeOptions
    from tests.support.fake_telegram import TOKEN

    figures = Figures(chats, deltas, rate, streaming=streaming)
    with tempfile.TemporaryDirectory(prefix="telegram-load-") as tmp, FakeThread() as fake:
        data_dir = Path(tmp)
        stamps = data_dir / "stamps.txt"
        argv = (sys.executable, "-I", "-S", str(STANDIN), "--stamps", str(stamps))
        options = BridgeOptions(
            data_dir=data_dir,
            agent=AgentOptions(argv=argv, env={"PATH": os.environ.get("PATH", "")}),
            allowed_users=None,
            max_agents=chats + 4,
            drain_timeout=10.0,
            inbox_size=1024,
        )
        base_url, file_url = await fake.call(lambda f: (f.base_url, f.base_file_url))
        settings = TelegramSettings(
            token=TOKEN,
            base_url=base_url,
            base_file_url=file_url,
            poll_timeout=1,
            streaming="draft" if streaming == "draft" else "edit",
        )
        bridges: list[Bridge] = []
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: serve(settings, lambda a, n: _bridge(a, n, options, bridges), stop=stop)
            )
            try:
                await _until(lambda: bool(bridges), 60)
                async with anyio.create_task_group() as watch:
                    watch.start_soon(_watch_lag, figures.lags)
                    await _stream_all(fake, bridges[0], figures)
                    watch.cancel_scope.cancel()
            finally:
                stop.set()
        emits = read_emits(stamps)
        await fake.call(lambda f: _collect(f, figures, emits))
        if calls_log is not None:
            await fake.call(lambda f: _write_calls(f, calls_log))
    return figures


async def _stream_all(fake: FakeThread, bridge: Bridge, figures: Figures) -> None:
    """Prompt every chat at once; wait for every answer and the outbox to drain."""
    import anyio

    chats, deltas, rate = figures.chats, figures.deltas, figures.rate
    await fake.call(lambda f: _prompt_all(f, chats, deltas, rate))
    started, cpu = time.monotonic(), time.process_time()
    await _until_answered(fake, chats, within=deltas / max(rate, 1) * 3 + 120)
    figures.seconds = time.monotonic() - started
    figures.cpu = time.process_time() - cpu
    with anyio.fail_after(60):
        await bridge.outbox.flush()
    stats = bridge.outbox.stats
    figures.outbox_rate_limited = stats.rate_limited
    figures.outbox_retries = stats.retries
    figures.outbox_coalesced = stats.coalesced


@contextlib.asynccontextmanager
async def _bridge(
    adapter: Adapter, bot_name: str, options: BridgeOptions, keep: list[Bridge]
) -> AsyncIterator[Bridge]:
    from bridge.service import Bridge
    from bridge.store import open_store

    store = await open_store("sqlite", options.data_dir)
    try:
        async with Bridge(adapter, store, options, bot_name=bot_name) as bridge:
            keep.append(bridge)
            yield bridge
    finally:
        await store.aclose()


async def _watch_lag(lags: list[float]) -> None:
    """How late the bridge's event loop wakes a sleeper: the loop's own delay."""
    import anyio

    while True:
        asked = time.monotonic()
        await anyio.sleep(LAG_TICK)
        lags.append(time.monotonic() - asked - LAG_TICK)


def _prompt_all(fake: FakeTelegram, chats: int, deltas: int, rate: float) -> None:
    for n in range(chats):
        chat = FIRST_CHAT + n
        user = {"id": chat, "is_bot": False, "first_name": f"User{n}"}
        fake.message(chat, f"bench id=c{n} deltas={deltas} rate={rate:g} marks=1", user=user)


def _end_line(n: int) -> str:
    return f"[end c{n}]"  # the stand-in's last line of answer n


async def _until(predicate: Callable[[], bool], within: float) -> None:
    import anyio

    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 (polls state another task changes)
            await anyio.sleep(POLL)


async def _until_answered(fake: FakeThread, chats: int, within: float) -> None:
    """Until every chat shows its answer's last line."""
    import anyio

    def missing(f: FakeTelegram) -> int:
        return sum(1 for n in range(chats) if f.find(_end_line(n), FIRST_CHAT + n) is None)

    with anyio.fail_after(within):
        while await fake.call(missing):  # noqa: ASYNC110 (the fake's state, in its thread)
            await anyio.sleep(0.25)


def _collect(fake: FakeTelegram, figures: Figures, emits: dict[str, list[float]]) -> None:
    """Counts from the fake's call log, and each delta's delay until it was visible."""
    figures.calls.update(c.method for c in fake.calls)
    for method, description in fake.errors:
        if description.startswith("Too Many Requests"):
            figures.too_many += 1
            figures.too_many_by_method[method] += 1
    seen, complete = _arrivals(fake, figures)
    for n in range(figures.chats):
        written = emits.get(f"c{n}", [])
        shown = seen.get(FIRST_CHAT + n, {})
        figures.unseen += max(0, figures.deltas - len(written))  # the agent's line is missing
        for seq, at in enumerate(written, start=1):
            if seq in shown:
                figures.delays.append(shown[seq] - at)
            else:
                figures.unseen += 1
        if written and FIRST_CHAT + n in complete:
            figures.final_delays.append(complete[FIRST_CHAT + n] - written[-1])
        answer = [m.text for m in fake.bot_messages(FIRST_CHAT + n) if MARK.search(m.text)]
        figures.answer_messages += len(answer)
        # As shown (markup stripped), in message order: each marker once, none cut in two.
        shown_marks = [int(m) for text in answer for m in MARK.findall(text)]
        figures.clean_splits += shown_marks == list(range(1, figures.deltas + 1))


def _arrivals(
    fake: FakeTelegram, figures: Figures
) -> tuple[dict[int, dict[int, float]], dict[int, float]]:
    """When each marker first arrived in each chat, and when the message call with the
    chat's end line did; `figures.answer_calls` counts the calls with a marker."""
    seen: dict[int, dict[int, float]] = {}  # chat → marker → first arrival with it
    complete: dict[int, float] = {}  # chat → arrival of the message call with its end line
    for call in fake.calls:
        if call.ok and call.method in ("sendMessage", "editMessageText", "sendMessageDraft"):
            chat_id, text = int(call.params["chat_id"]), str(call.params.get("text", ""))
            first = seen.setdefault(chat_id, {})
            # The MarkdownV2 sent: a marker holds no reserved character, so it reads
            # as the user sees it (`clean_splits` checks that on the shown text).
            marks = MARK.findall(text)
            for mark in marks:
                first.setdefault(int(mark), call.at)
            figures.answer_calls += bool(marks)
            n = chat_id - FIRST_CHAT
            # MarkdownV2 escapes the end line's brackets: match it as the user reads it.
            if call.method != "sendMessageDraft" and _end_line(n) in text.replace("\\", ""):
                complete.setdefault(chat_id, call.at)  # a message, not a preview
    return seen, complete


def _write_calls(fake: FakeTelegram, path: Path) -> None:
    """One JSON line per Bot API call: where and when it landed, not the text itself."""
    with path.open("w") as out:
        for call in fake.calls:
            text = str(call.params.get("text", ""))
            markers = [int(m) for m in MARK.findall(text)]
            line = {
                "method": call.method,
                "chat": call.params.get("chat_id"),
                "message": call.params.get("message_id"),
                "at": round(call.at, 4),
                "ok": call.ok,
                "chars": len(text),
                "last_marker": max(markers, default=None),
            }
            out.write(json.dumps(line) + "\n")


# --- output ------------------------------------------------------------------------------------


def table(args: argparse.Namespace, figures: Figures) -> str:
    s = figures.summary()
    calls = ", ".join(f"{m} {k}" for m, k in s["calls"].items())
    rows = [
        ("command", " ".join(["bench/telegram_load.py", *sys.argv[1:]])),
        ("answers stream by", "drafts" if s["streaming"] == "draft" else "edits"),
        ("arguments", f"--chats {args.chats} --deltas {args.deltas} --rate {args.rate:g}"),
        (
            "machine",
            f"python {platform.python_version()}, cpus {os.cpu_count()}, "
            f"load average {os.getloadavg()[0]:.2f}",
        ),
        ("answers complete after", f"{s['wall_seconds']:.1f} s"),
        ("429s from the fake", f"{s['fake_429s']} {s['fake_429s_by_method'] or ''}".strip()),
        ("429s seen by the outbox", f"{s['outbox_rate_limited']} (retries {s['outbox_retries']})"),
        ("platform calls", f"{s['calls_total']} ({s['calls_without_getUpdates']} without polls)"),
        ("  by method", calls),
        ("edits merged in the outbox", str(s["outbox_coalesced"])),
        ("deltas measured", f"{s['deltas_measured']} (never seen: {s['deltas_unseen']})"),
        (
            "answers split cleanly",
            f"{s['answers_split_cleanly']} of {args.chats} "
            f"({s['answer_messages']} messages hold answer text)",
        ),
        ("delta → visible p50", f"{s['delay_p50_s']:.3f} s"),
        ("delta → visible p99", f"{s['delay_p99_s']:.3f} s"),
        ("delta → visible max", f"{s['delay_max_s']:.3f} s"),
        ("answer calls per chat", f"{s['answer_calls_per_chat']:.1f} (sends, edits, drafts)"),
        (
            "last delta → whole answer sent",
            f"p50 {s['final_p50_s']:.3f} s, max {s['final_max_s']:.3f} s",
        ),
        ("bench process CPU", f"{s['bench_process_cpu_s']:.1f} s (bridge, PTB, fake thread)"),
        ("event-loop lag p99 / max", f"{s['loop_lag_p99_s']:.3f} s / {s['loop_lag_max_s']:.3f} s"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--chats", type=int, default=50, help="private chats streaming at once")
    parser.add_argument("--deltas", type=int, default=2000, help="text deltas per answer")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas per second per agent")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--calls-log", type=Path, help="write the fake's calls here (JSON lines)")
    parser.add_argument(
        "--paths",
        default="draft,edit",
        help="streaming paths to measure, one after the other on the same load: draft, edit",
    )
    args = parser.parse_args(argv)
    import anyio

    runs = []
    for path in [p.strip() for p in args.paths.split(",") if p.strip()]:
        log = args.calls_log.with_suffix(f".{path}.jsonl") if args.calls_log else None
        runs.append(anyio.run(run_bench, args.chats, args.deltas, args.rate, path, log))
    if args.json:
        print(json.dumps({"args": vars(args), "runs": [f.summary() for f in runs]}, default=str))
    else:
        print("\n\n".join(table(args, figures) for figures in runs))
        if len(runs) == 2:
            print("\n" + compare(runs[0], runs[1]))
    if any(figures.too_many for figures in runs):
        raise SystemExit(1)


def compare(native: Figures, edit: Figures) -> str:
    """The first path's figures over the second's, measured in this one run."""
    a, b = native.summary(), edit.summary()
    rows = [
        (f"{a['streaming']}/{b['streaming']}", "ratio"),
        ("delta → visible p50", _ratio(a["delay_p50_s"], b["delay_p50_s"])),
        ("delta → visible p99", _ratio(a["delay_p99_s"], b["delay_p99_s"])),
        ("answer calls per chat", _ratio(a["answer_calls_per_chat"], b["answer_calls_per_chat"])),
        ("last delta → whole answer sent p50", _ratio(a["final_p50_s"], b["final_p50_s"])),
        ("429s", f"{a['fake_429s']} / {b['fake_429s']}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}" if y else "n/a"


if __name__ == "__main__":
    main()

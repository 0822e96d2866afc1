"""Prometheus metrics (text format) and a health endpoint, served with aiohttp.

Nothing is counted twice: the numbers are read, when scraped, from what the
bridges already keep (agent slots, conversations, each outbox's `OutboxStats`,
the conversations' `bridge.stats.Stats`) and, in a frontend or worker, from its
`bridge.scale.stats.ScaleStats` (role, leases, Redis); only inbound messages are
counted here, by `Metrics.counting`, which wraps a bridge's `handle`. Served on
`PI_BRIDGE_METRICS_PORT`, bound to 127.0.0.1 unless `PI_BRIDGE_METRICS_HOST`
says otherwise (the numbers reveal activity).

`/metrics`: the text format. `/healthz`: 200 while every bridge accepts
messages, 503 once one drains (so a load balancer stops sending first).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import anyio
from aiohttp import web

from bridge.httpserver import READ_TIMEOUT
from bridge.httpserver import runner as http_runner

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from bridge.model import Inbound
    from bridge.scale.stats import ScaleStats
    from bridge.service import Bridge
    from bridge.stats import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Samples = list[tuple[str, float]]  # (rendered labels, value)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")  # as bridge/spend/usage.py


@dataclass
class Counted:
    """A bridge's `handle` that counts what comes in (adapters only need `handle`)."""

    bridge: Bridge
    metrics: Metrics
    platform: str

    async def handle(self, inbound: Inbound) -> None:
        self.metrics.inbound[self.platform] += 1
        await self.bridge.handle(inbound)

    def undecodable(self) -> None:
        self.bridge.undecodable()


@dataclass
class Metrics:
    bridges: dict[str, Bridge] = field(default_factory=dict)  # platform → its bridge
    inbound: Counter[str] = field(default_factory=Counter)
    scale: ScaleStats | None = None  # set in a frontend or worker (`--role`)

    def counting(self, platform: str, bridge: Bridge) -> Counted:
        """Register `bridge` for scrapes; the returned handler counts inbound messages."""
        self.bridges[platform] = bridge
        return Counted(bridge, self, platform)

    @property
    def healthy(self) -> bool:
        return all(b.supervisor.accepting for b in self.bridges.values())

    def render(self) -> str:
        out: list[str] = []
        family = partial(_family, out)
        histogram = partial(_histogram, out)
        bridges = sorted(self.bridges.items())
        family(
            "pi_bridge_live_agents",
            "gauge",
            "Agent processes running now.",
            [(_labels(platform=p), len(b.supervisor.slots.live)) for p, b in bridges],
        )
        family(
            "pi_bridge_conversations",
            "gauge",
            "Conversations known to this process.",
            [(_labels(platform=p), len(b.supervisor.conversations)) for p, b in bridges],
        )
        family(
            "pi_bridge_inbound_messages_total",
            "counter",
            "Platform updates handed to the bridge (before admission).",
            [(_labels(platform=p), self.inbound[p]) for p, _ in bridges],
        )
        family(
            "pi_bridge_undecodable_updates_total",
            "counter",
            "Platform updates skipped (and confirmed) because they could not be read.",
            [(_labels(platform=p), b.services.stats.undecodable) for p, b in bridges],
        )
        family(
            "pi_bridge_platform_calls_total",
            "counter",
            "Platform API calls by method, failed ones included.",
            [
                (_labels(platform=p, method=m), n)
                for p, b in bridges
                for m, n in sorted(b.outbox.stats.calls.items())
            ],
        )
        stats = [(p, b.services.stats) for p, b in bridges]
        family(
            "pi_bridge_runs_started_total",
            "counter",
            "Agent runs started (prompts the agent began to answer).",
            [(_labels(platform=p), st.runs_started) for p, st in stats],
        )
        family(
            "pi_bridge_runs_finished_total",
            "counter",
            "Agent runs that came to an end (answered, stopped or failed).",
            [(_labels(platform=p), st.runs_ended) for p, st in stats],
        )
        family(
            "pi_bridge_plans_total",
            "counter",
            "Plans first (/plan) by outcome, and tool calls refused while planning.",
            [
                (_labels(platform=p, outcome=k), n)
                for p, st in stats
                for k, n in sorted(st.plans.items())
            ],
        )
        family(
            "pi_bridge_agent_events_total",
            "counter",
            "Events read from agents, by kind.",
            [
                (_labels(platform=p, kind=k), n)
                for p, st in stats
                for k, n in sorted(st.events.items())
            ],
        )
        for name, attr, help_ in (
            (
                "pi_bridge_inbound_to_agent_seconds",
                "inbound_to_agent",
                "From a platform message reaching the bridge to its prompt, steer or "
                "follow-up being accepted by the agent (an agent's cold start included).",
            ),
            (
                "pi_bridge_dialog_answer_seconds",
                "dialog_answer",
                "From an agent's dialog being shown to a person answering it.",
            ),
        ):
            histogram(name, help_, [({"platform": p}, getattr(st, attr)) for p, st in stats])
        family(
            "pi_bridge_platform_rate_limited_total",
            "counter",
            "Platform calls refused with 429 (rate limited), by method.",
            [
                (_labels(platform=p, method=m), n)
                for p, b in bridges
                for m, n in sorted(b.outbox.stats.rate_limited_calls.items())
            ],
        )
        for name, attr, help_ in (
            ("pi_bridge_outbox_retries_total", "retries", "Calls repeated after a failure."),
            ("pi_bridge_outbox_dropped_total", "dropped", "Ops never carried out."),
            ("pi_bridge_outbox_coalesced_total", "coalesced", "Ops merged into queued ones."),
        ):
            family(
                name,
                "counter",
                help_,
                [(_labels(platform=p), getattr(b.outbox.stats, attr)) for p, b in bridges],
            )
        histogram(
            "pi_bridge_delta_to_visible_seconds",
            "From a message or an answer's new text reaching the outbox to the "
            "platform call that shows it returning; routine refreshes are left out.",
            [({"platform": p}, b.outbox.stats.visible) for p, b in bridges],
        )
        family(
            "pi_bridge_scheduled_runs_total",
            "counter",
            "Scheduled runs (/every, /at) by outcome: fired, missed (the bridge was down "
            "longer than catch_up) and failed (not handed in, or the maker no longer allowed).",
            [
                (_labels(platform=p, outcome=o), getattr(b.ticker.stats, o))
                for p, b in bridges
                if b.ticker is not None
                for o in ("fired", "missed", "failed")
            ],
        )
        # Spend by platform only: a label per person or chat would grow without bound.
        family(
            "pi_bridge_spend_dollars_total",
            "counter",
            "What the agents reported their models cost, each answer counted once.",
            [(_labels(platform=p), st.spend_cost) for p, st in stats],
        )
        family(
            "pi_bridge_spend_tokens_total",
            "counter",
            "Tokens the agents reported their models used, by kind.",
            [
                (_labels(platform=p, kind=k), st.spend_tokens[k])
                for p, st in stats
                for k in TOKEN_KINDS
            ],
        )
        if self.scale is not None:
            _scale(out, self.scale)
        return "\n".join(out) + "\n"


def _family(out: list[str], name: str, kind: str, help_: str, samples: Samples) -> None:
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} {kind}")
    out.extend(f"{name}{labels} {value:g}" for labels, value in samples)


def _histogram(
    out: list[str], name: str, help_: str, series: list[tuple[dict[str, str], Histogram]]
) -> None:
    """One histogram family: each series' cumulative buckets, sum and count."""
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} histogram")
    for labels, histogram in series:
        for le, n in histogram.cumulative():
            out.append(f"{name}_bucket{_labels(**labels, le=le)} {n}")
        out.append(f"{name}_sum{_labels(**labels)} {histogram.total:g}")
        out.append(f"{name}_count{_labels(**labels)} {histogram.count}")


def _scale(out: list[str], scale: ScaleStats) -> None:
    """A frontend's or worker's own families, labelled with its name in Redis."""
    name, both = _labels(name=scale.name), _labels(role=scale.role, name=scale.name)
    _family(out, "pi_bridge_role_info", "gauge", "This process's role and name.", [(both, 1)])
    for metric, kind, help_, value in (
        ("pi_bridge_leases_held", "gauge", "Conversations this worker owns.", scale.leases_held),
        (
            "pi_bridge_lease_takeovers_total",
            "counter",
            "Conversations claimed after another worker's lease lapsed.",
            scale.lease_takeovers,
        ),
        (
            "pi_bridge_leases_lost_total",
            "counter",
            "Conversations this worker found owned by another.",
            scale.leases_lost,
        ),
        (
            "pi_bridge_rate_budget_waits_total",
            "counter",
            "Platform calls held back by a rate budget shared in Redis (frontends and workers).",
            scale.budget_waits,
        ),
        (
            "pi_bridge_telegram_polling",
            "gauge",
            "1 while this frontend holds the Telegram polling lease.",
            int(scale.polling),
        ),
    ):
        _family(out, metric, kind, help_, [(name, value)])
    _family(
        out,
        "pi_bridge_redis_errors_total",
        "counter",
        "Redis calls that failed (each retried with back-off).",
        [(both, scale.redis_errors)],
    )
    _histogram(
        out,
        "pi_bridge_stream_lag_seconds",
        "From a frontend adding an inbound to its stream to the owning worker reading it.",
        [({"name": scale.name}, scale.stream_lag)],
    )
    _histogram(
        out,
        "pi_bridge_remote_call_seconds",
        "A worker's platform call through a frontend, request to answer.",
        [({"name": scale.name}, scale.call_seconds)],
    )


def _labels(**labels: str) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels.items()) + "}"


def make_app(metrics: Metrics) -> web.Application:
    async def scrape(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    async def health(request: web.Request) -> web.Response:
        ok = metrics.healthy
        body = {"status": "ok" if ok else "draining", "platforms": sorted(metrics.bridges)}
        return web.Response(
            text=json.dumps(body), status=200 if ok else 503, content_type="application/json"
        )

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/healthz", health)
    return app


async def serve_metrics(
    metrics: Metrics,
    host: str,
    port: int,
    *,
    read_timeout: float = READ_TIMEOUT,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; `started` once the port is bound (a taken port fails here)."""
    runner = http_runner(make_app(metrics), read_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        task_status.started()
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(3):
            await runner.cleanup()

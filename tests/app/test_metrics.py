"""The metrics text a scrape gets: a bridge's families and a frontend's or worker's.

`metrics_with_a_bridge` builds a `Metrics` with a real (not started) bridge
registered and a `ScaleStats`, so every family renders with samples; the
dashboard's test (tests/deploy/test_grafana.py) checks its queries against it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from bridge.app.metrics import Metrics
from bridge.scale.stats import ScaleStats
from bridge.service import Bridge
from bridge.store import open_store
from tests.support.bridge_harness import LIMITS, options
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def metrics_with_a_bridge(data_dir: Path, scale: ScaleStats) -> AsyncIterator[Metrics]:
    """Metrics of a worker named in `scale` with a Telegram bridge registered."""
    store = await open_store("sqlite", data_dir)
    try:
        # Scrapes only read the bridge's counters: it need not run, nor its agent exist.
        bridge = Bridge(RecordingAdapter(LIMITS), store, options(data_dir, ["pi"], {}))
        metrics = Metrics(scale=scale)
        metrics.counting("telegram", bridge)
        yield metrics
    finally:
        await store.aclose()


def samples(text: str) -> dict[str, float]:
    """Each sample line's name and labels → its value."""
    lines = (line.rpartition(" ") for line in text.splitlines() if not line.startswith("#"))
    return {series: float(value) for series, _, value in lines if series}


def families(text: str) -> dict[str, str]:
    """Each family's name → its type, from the `# TYPE` lines."""
    return {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")
    }


async def test_a_workers_scale_families_render_with_its_role_and_name(tmp_path: Path) -> None:
    scale = ScaleStats("worker", "worker-1", leases_held=3, lease_takeovers=2, leases_lost=1)
    scale.redis_errors, scale.budget_waits, scale.polling = 4, 5, True
    scale.stream_lag.observe(0.02)
    for seconds in (0.3, 3.0):
        scale.call_seconds.observe(seconds)
    async with metrics_with_a_bridge(tmp_path, scale) as metrics:
        metrics.bridges["telegram"].outbox.stats.visible.observe(0.7)
        text = metrics.render()
    got = samples(text)
    name = '{name="worker-1"}'
    assert got['pi_bridge_role_info{role="worker",name="worker-1"}'] == 1
    assert got[f"pi_bridge_leases_held{name}"] == 3
    assert got[f"pi_bridge_lease_takeovers_total{name}"] == 2
    assert got[f"pi_bridge_leases_lost_total{name}"] == 1
    assert got['pi_bridge_redis_errors_total{role="worker",name="worker-1"}'] == 4
    assert got[f"pi_bridge_rate_budget_waits_total{name}"] == 5
    assert got[f"pi_bridge_telegram_polling{name}"] == 1
    lag = "pi_bridge_stream_lag_seconds"
    assert got[f'{lag}_bucket{{name="worker-1",le="0.01"}}'] == 0
    assert got[f'{lag}_bucket{{name="worker-1",le="0.025"}}'] == 1
    assert (got[f"{lag}_sum{name}"], got[f"{lag}_count{name}"]) == (0.02, 1)
    call = "pi_bridge_remote_call_seconds"
    assert got[f'{call}_bucket{{name="worker-1",le="0.5"}}'] == 1
    assert got[f'{call}_bucket{{name="worker-1",le="+Inf"}}'] == 2
    assert (got[f"{call}_sum{name}"], got[f"{call}_count{name}"]) == (3.3, 2)
    visible = "pi_bridge_delta_to_visible_seconds"
    assert got[f'{visible}_bucket{{platform="telegram",le="1"}}'] == 1
    assert got[f'{visible}_count{{platform="telegram"}}'] == 1
    kinds = families(text)
    assert kinds["pi_bridge_leases_held"] == kinds["pi_bridge_telegram_polling"] == "gauge"
    assert kinds["pi_bridge_lease_takeovers_total"] == "counter"
    assert kinds[lag] == kinds[call] == kinds[visible] == "histogram"


async def test_a_process_of_role_all_renders_no_scale_families(tmp_path: Path) -> None:
    async with metrics_with_a_bridge(tmp_path, ScaleStats()) as metrics:
        metrics.scale = None
        text = metrics.render()
    kinds = families(text)
    assert "pi_bridge_role_info" not in kinds
    assert "pi_bridge_stream_lag_seconds" not in kinds
    # The bridge's histograms, through the same helper as the scale ones.
    assert kinds["pi_bridge_inbound_to_agent_seconds"] == "histogram"
    assert samples(text)['pi_bridge_dialog_answer_seconds_count{platform="telegram"}'] == 0


async def test_an_update_skipped_as_undecodable_is_counted_per_platform(tmp_path: Path) -> None:
    async with metrics_with_a_bridge(tmp_path, ScaleStats()) as metrics:
        counted = metrics.counting("telegram", metrics.bridges["telegram"])
        counted.undecodable()
        counted.undecodable()
        text = metrics.render()
    assert samples(text)['pi_bridge_undecodable_updates_total{platform="telegram"}'] == 2
    assert families(text)["pi_bridge_undecodable_updates_total"] == "counter"

"""The Grafana dashboard (deploy/grafana/pi-bridge.json) against the metrics we emit.

Each query may name only families `Metrics.render` emits (a bridge and a worker's
`ScaleStats` registered), and the families an operator needs must each be on some
panel: renaming a metric without the dashboard fails here, not on a blank graph.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from bridge.scale.stats import ScaleStats
from tests.app.test_metrics import families, metrics_with_a_bridge
from tests.support.paths import REPO

if TYPE_CHECKING:
    from pathlib import Path

DASHBOARD = REPO / "deploy" / "grafana" / "pi-bridge.json"
VARIABLE = "DS_PROMETHEUS"
METRIC = re.compile(r"\bpi_bridge_[a-z_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# What an operator must be able to see; each needs a panel (docs/operations.md).
ON_THE_DASHBOARD = {
    "pi_bridge_runs_started_total",
    "pi_bridge_runs_finished_total",
    "pi_bridge_live_agents",
    "pi_bridge_inbound_messages_total",
    "pi_bridge_undecodable_updates_total",
    "pi_bridge_platform_rate_limited_total",
    "pi_bridge_outbox_dropped_total",
    "pi_bridge_delta_to_visible_seconds",
    "pi_bridge_role_info",
    "pi_bridge_leases_held",
    "pi_bridge_lease_takeovers_total",
    "pi_bridge_leases_lost_total",
    "pi_bridge_stream_lag_seconds",
    "pi_bridge_remote_call_seconds",
    "pi_bridge_redis_errors_total",
    "pi_bridge_rate_budget_waits_total",
    "pi_bridge_telegram_polling",
    "pi_bridge_spend_dollars_total",
    "pi_bridge_spend_tokens_total",
}


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    out: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]


def _family_of(name: str, kinds: dict[str, str]) -> str:
    """The family a series name belongs to: a histogram's `_bucket`, `_sum` and `_count`
    series are its own family's."""
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and kinds.get(base) == "histogram":
            return base
    return name


@pytest.fixture
async def rendered(tmp_path: Path) -> dict[str, str]:
    """Family → type, of everything a worker with a bridge renders."""
    async with metrics_with_a_bridge(tmp_path, ScaleStats("worker", "worker-1")) as metrics:
        return families(metrics.render())


def test_the_dashboard_has_what_grafana_needs_to_import_it() -> None:
    dashboard = _dashboard()
    for key in ("title", "uid", "schemaVersion", "panels", "templating", "time"):
        assert key in dashboard, key
    assert (dashboard["title"], dashboard["uid"]) == ("pi-chat-bridge", "pi-bridge")
    assert dashboard["schemaVersion"] == 39
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == VARIABLE]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")


def test_every_panel_has_an_id_a_place_the_data_source_and_a_query() -> None:
    panels = _panels(_dashboard())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), ids
    for panel in panels:
        title = panel["title"]
        assert {"h", "w", "x", "y"} <= panel["gridPos"].keys(), title
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, title
        if panel["type"] == "row":
            continue  # a heading: no query of its own
        assert panel["type"] in ("timeseries", "stat"), title
        assert panel["datasource"]["uid"] == f"${{{VARIABLE}}}", title
        assert panel["targets"], title
        for target in panel["targets"]:
            assert target.get("datasource", panel["datasource"]) == panel["datasource"], title
            assert target["expr"].strip(), title


@pytest.mark.anyio
async def test_every_query_names_only_metrics_the_bridge_emits(rendered: dict[str, str]) -> None:
    for expr in _exprs(_dashboard()):
        # Parses enough to trust the names found in it.
        assert expr.count("(") == expr.count(")"), expr
        assert expr.count("[") == expr.count("]"), expr
        names = METRIC.findall(expr)
        assert names, expr
        unknown = {n for n in names if _family_of(n, rendered) not in rendered}
        assert not unknown, f"{expr}: no such metric {unknown}"
        for name in names:  # a histogram is read through its buckets, sum or count
            family = _family_of(name, rendered)
            assert (rendered[family] == "histogram") == (family != name), expr


@pytest.mark.anyio
async def test_every_metric_an_operator_needs_is_on_a_panel(rendered: dict[str, str]) -> None:
    assert rendered.keys() >= ON_THE_DASHBOARD, ON_THE_DASHBOARD - rendered.keys()
    shown = {_family_of(n, rendered) for e in _exprs(_dashboard()) for n in METRIC.findall(e)}
    missing = {name for name in rendered if name in ON_THE_DASHBOARD and name not in shown}
    assert not missing, f"no panel shows {missing}"

"""deploy/'s Prometheus alert rules and Grafana dashboard: every metric they name is one the
sidecar exports, and the scrape-time gauges say what the database and the node's files hold."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sidecar.api.metrics import Metrics
from sidecar.api.metrics_state import StateCollector, read_database_state

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "sidecar-alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "sidecar-dashboard.json"
METRIC = re.compile(r"\bsidecar_[a-z0-9_]+\b")
# The sample names each kind of metric family is exposed under.
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("", "_sum", "_count", "_created"), "info": ("_info",)}


def exported() -> set[str]:
    """Every sample name the API's /metrics may carry (no request or database needed)."""
    metrics = Metrics()
    metrics.add_scraped(StateCollector(lambda: None))
    return {family.name + suffix for family in metrics.registry.collect()
            for suffix in SUFFIXES[family.type]}


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    def walk(panels: list[dict[str, Any]]) -> list[str]:
        found = []
        for panel in panels:
            found += [t["expr"] for t in panel.get("targets", [])]
            found += walk(panel.get("panels", []))
        return found
    return walk(json.loads(DASHBOARD.read_text())["panels"])


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_metric_named_is_exported(source: str) -> None:
    exprs = [r["expr"] for r in rules()] if source == "rules" else dashboard_exprs()
    assert exprs
    named = {name for expr in exprs for name in METRIC.findall(expr)}
    assert named, source
    assert named <= exported(), f"{source} names metrics nobody exports: {named - exported()}"


def test_the_alerts_cover_what_an_operator_must_know() -> None:
    alerts = {r["alert"]: r for r in rules()}
    for rule in alerts.values():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    # backfill stopped or failing, provider paused, zones uncalibrated or stale, abstain rate
    # jumping, API 5xx, keyword index behind the change log: each by the metric it reads.
    must = {"SidecarBackfillStopped": "sidecar_backfill_last_success_timestamp_seconds",
            "SidecarBackfillFailing": "sidecar_backfill_consecutive_errors",
            "SidecarBackfillPausedByProvider": 'sidecar_backfill_paused{reason="error"}',
            "SidecarZonesUncalibrated": "sidecar_zones_calibrated",
            "SidecarZonesStale": "sidecar_zones_calibrated_timestamp_seconds",
            "SidecarAbstainRateJump": 'sidecar_zones_total{zone="abstain"}',
            "SidecarApi5xx": 'sidecar_http_requests_total{status=~"5.."}',
            "SidecarKeywordIndexBehind": "sidecar_keyword_changes_behind"}
    for name, metric in must.items():
        assert metric in alerts[name]["expr"], name


def test_a_misspelled_metric_would_be_caught() -> None:
    assert "sidecar_zones_total" in exported()
    assert "sidecar_zone_total" not in exported()
    assert "sidecar_http_requests" not in exported()  # a counter is exposed as _total


def test_the_scrape_reads_the_state_of_the_database_and_the_node(client: Any,
                                                                   auth: dict[str, str]) -> None:
    text = client.get("/metrics", headers=auth).get_data(as_text=True)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("sidecar_state_up", ())] == 1.0
    assert samples[("sidecar_keyword_index_ready", ())] == 1.0
    assert samples[("sidecar_keyword_changes_behind", ())] == 0.0
    # demo_state's zones are the settings' (no `sidecar calibrate` ran): not calibrated.
    assert samples[("sidecar_zones_calibrated", (("scorer", "bi-encoder:all-minilm-l6-v2"),))] \
        == 0.0
    assert samples[("sidecar_db_max_connections", ())] >= samples[("sidecar_db_connections", ())]
    assert samples[("sidecar_db_connections", ())] >= 1.0


def test_the_scrape_needs_the_key_and_never_queries_on_the_api_pool(
    demo_state: Any, auth: dict[str, str]
) -> None:
    """Fault (issue 37): /metrics was open, and read the database on the API's pool at every
    scrape. Here the API's pool is never opened: the scrape still reads the database (on a
    connection of its own), and only once per SIDECAR_METRICS_STATE_TTL_S."""
    import dataclasses

    from sidecar.api.app import create_app
    from sidecar.db import Database

    shut = Database(demo_state.urls.database_url)  # a pool never opened: any use fails
    res = dataclasses.replace(demo_state, db=shut)
    http = create_app(res.settings, res).test_client()
    assert http.get("/metrics").status_code == 401
    assert http.get("/metrics", headers={"Authorization": "Bearer wrong-key"}).status_code == 401
    text = http.get("/metrics", headers=auth).get_data(as_text=True)
    samples = {s.name: s.value for family in text_string_to_metric_families(text)
               for s in family.samples if not s.labels}
    assert samples["sidecar_state_up"] == 1.0
    assert samples["sidecar_db_max_connections"] > 0

    reads: list[float] = []
    now = [1000.0]

    def read(r: Any) -> Any:
        reads.append(now[0])
        return read_database_state(r)

    collector = StateCollector(lambda: res, ttl_s=30.0, read=read, clock=lambda: now[0])
    for _ in range(5):  # Prometheus every few seconds, or someone scraping in a loop
        list(collector.collect())
        now[0] += 5.0
    assert reads == [1000.0]
    now[0] += 10.0
    list(collector.collect())
    assert reads == [1000.0, 1035.0]

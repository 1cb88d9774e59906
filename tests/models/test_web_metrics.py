"""The request metrics both Flask apps share (models.web.metrics)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask

from models.host.metrics import HostMetrics
from models.web.metrics import LATENCY_BUCKETS, AppMetrics
from sidecar.api.metrics import Metrics


def _app(metrics: AppMetrics) -> Flask:
    app = Flask("t")
    metrics.bind(app)

    @app.get("/items/<int:item>")
    def item(item: int) -> str:
        return str(item)

    @app.get("/metrics")
    def scrape() -> object:
        return metrics.response()

    return app


def _count(text: str, name: str, route: str, status: str) -> float:
    m = re.search(rf'^{name}_total\{{route="{re.escape(route)}",status="{status}"\}} (\S+)$',
                  text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.parametrize("metrics", [Metrics(), HostMetrics()], ids=["api", "host"])
def test_requests_are_counted_by_route_rule_and_status(metrics: AppMetrics) -> None:
    client = _app(metrics).test_client()
    for item in (1, 2, 3):
        assert client.get(f"/items/{item}").status_code == 200
    assert client.get("/items/x").status_code == 404
    assert client.get("/nowhere/at/all").status_code == 404
    resp = client.get("/metrics")
    assert resp.mimetype == "text/plain"
    text = resp.get_data(as_text=True)
    name = metrics.requests._name  # sidecar_http_requests, model_host_requests
    # One series per URL rule, however many URLs: cardinality stays bounded.
    assert _count(text, name, "/items/<int:item>", "200") == 3
    assert _count(text, name, "unmatched", "404") == 2


def test_both_apps_time_with_the_same_buckets() -> None:
    api, host = Metrics(), HostMetrics()
    assert api.stage_seconds._upper_bounds[:-1] == list(LATENCY_BUCKETS)
    assert host.run_seconds._upper_bounds == api.stage_seconds._upper_bounds


def test_only_the_api_adds_up_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An empty multiprocess directory: an app that adds up workers reads its samples from there
    # (none), one that answers for itself reports its own registry.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    api, host = Metrics(), HostMetrics()
    for metrics in (api, host):
        metrics.requests.labels("/x", "200").inc()
    assert b'route="/x"' not in api.render()
    assert b'route="/x"' in host.render()

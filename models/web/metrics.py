"""Prometheus request metrics shared by both Flask apps, the sidecar API and the model host.

Each app gets its own registry (tests build many apps in one process; names never clash), a
request counter by route and status fed by one after-request hook, the same latency buckets, and
one ``/metrics`` response. The route label is the URL rule (``/v1/retrievals/<id>``), never the
URL itself, so the number of series stays bounded whatever clients send.
"""

from __future__ import annotations

import os

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry, Counter, generate_latest, multiprocess
from prometheus_client.registry import Collector

# Seconds, from a cache hit (1 ms) to a slow rerank on a busy CPU (30 s).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Prometheus' text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class AppMetrics:
    """A registry and a request counter, counted for every response of the app it is bound to.

    ``multiprocess``: when ``PROMETHEUS_MULTIPROC_DIR`` is set (gunicorn with several workers,
    see ``sidecar/api/gunicorn_hooks.py``), a scrape adds up the samples every worker wrote there,
    whichever worker answers it. An app whose workers each answer for themselves passes False.
    """

    def __init__(self, requests_metric: str, *, multiprocess: bool = False) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.multiprocess = multiprocess
        # Collectors read at scrape time (the state of a database, of files): in multiprocess
        # mode they join the merged registry, answered by whichever worker is scraped.
        self.scraped: list[Collector] = []
        self.requests = Counter(requests_metric, "HTTP requests by route and status",
                                ["route", "status"], registry=self.registry)

    def add_scraped(self, collector: Collector) -> None:
        """Register a collector read at each scrape, in this registry and the merged one."""
        self.registry.register(collector)
        self.scraped.append(collector)

    def bind(self, app: Flask) -> None:
        """Count every response of ``app`` (errors and unknown URLs included)."""

        @app.after_request
        def _count(response: Response) -> Response:
            route = request.url_rule.rule if request.url_rule else "unmatched"
            self.requests.labels(route, str(response.status_code)).inc()
            return response

    def render(self) -> bytes:
        """The exposition text, merged across workers in multiprocess mode."""
        if self.multiprocess and os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            for collector in self.scraped:
                registry.register(collector)
            return generate_latest(registry)
        return generate_latest(self.registry)

    def response(self) -> Response:
        """The ``GET /metrics`` response."""
        return Response(self.render(), mimetype=CONTENT_TYPE)

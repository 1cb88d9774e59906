"""Prometheus metrics: request counts, per-stage latency from the trace, zones, LLM and caches."""

from __future__ import annotations

import os

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

from sidecar.core.trace import Trace

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """One registry per app, so several apps (tests) never clash on metric names.

    Under gunicorn with several workers, set ``PROMETHEUS_MULTIPROC_DIR`` and every worker's
    samples are aggregated at scrape time.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("sidecar_http_requests", "HTTP requests by route and status",
                                ["route", "status"], registry=r)
        self.stage_seconds = Histogram("sidecar_stage_seconds", "Pipeline stage latency",
                                       ["step", "status"], buckets=_BUCKETS, registry=r)
        self.zones = Counter("sidecar_zones", "Retrievals by answer zone", ["zone"], registry=r)
        self.gate = Counter("sidecar_gate_rejections", "Input gate rejections by reason",
                            ["reason"], registry=r)
        self.condense = Counter("sidecar_condense", "Condense outcomes (llm, cache, fallback)",
                                ["source"], registry=r)
        self.llm_calls = Counter("sidecar_llm_calls", "Calls to the LLM by result",
                                 ["result"], registry=r)
        self.fallbacks = Counter("sidecar_fallbacks", "Degraded stages by stage and reason",
                                 ["step", "reason"], registry=r)
        self.cache = Counter("sidecar_cache", "Cache lookups by cache and result",
                             ["cache", "result"], registry=r)

    def observe_trace(self, trace: Trace) -> None:
        """Record every stage of a finished request."""
        for step in trace.steps:
            if step.status != "skipped":
                self.stage_seconds.labels(step.step, step.status).observe(step.ms / 1000.0)
            if step.status == "error":
                self.fallbacks.labels(step.step, "error").inc()

    def render(self) -> bytes:
        """The exposition text, merged across gunicorn workers when multiprocess mode is on."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)

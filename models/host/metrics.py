"""Prometheus metrics of the model host (one registry per app, so tests can build many)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from models.host.batcher import BatchStats

_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_TIME_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class HostMetrics:
    """Requests by route and status, and per model call: items, requests, queue and run time."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "model_host_requests", "HTTP requests by route and status",
            ["route", "status"], registry=self.registry,
        )  # fmt: skip
        self.inputs = Counter(
            "model_host_inputs", "Texts or pairs computed, by model", ["model"],
            registry=self.registry,
        )  # fmt: skip
        self.batch_items = Histogram(
            "model_host_batch_items", "Texts or pairs per model call", ["model"],
            buckets=_SIZE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.batch_requests = Histogram(
            "model_host_batch_requests", "Requests sharing one model call", ["model"],
            buckets=_SIZE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.queue_seconds = Histogram(
            "model_host_queue_seconds", "Wait of the oldest item before its model call",
            ["model"], buckets=_TIME_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.run_seconds = Histogram(
            "model_host_inference_seconds", "Duration of one model call", ["model"],
            buckets=_TIME_BUCKETS, registry=self.registry,
        )  # fmt: skip

    def observer(self, model: str) -> Callable[[BatchStats], None]:
        """The ``on_batch`` callback of the batcher of ``model`` ("embed" or "rerank")."""

        def observe(stats: BatchStats) -> None:
            self.inputs.labels(model).inc(stats.items)
            self.batch_items.labels(model).observe(stats.items)
            self.batch_requests.labels(model).observe(stats.requests)
            self.queue_seconds.labels(model).observe(stats.queue_seconds)
            self.run_seconds.labels(model).observe(stats.run_seconds)

        return observe

    def render(self) -> bytes:
        """Prometheus text exposition."""
        return generate_latest(self.registry)

"""Prometheus metrics of the model host (one registry per app, so tests can build many)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Histogram

from models.host.batcher import BatchStats
from models.web.metrics import LATENCY_BUCKETS, AppMetrics

_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class HostMetrics(AppMetrics):
    """Requests by route and status (as the sidecar API counts them), and per model call:
    items, requests, queue and run time.

    Not multiprocess: each worker of the host serves its own models (one per GPU) and answers
    for itself.
    """

    def __init__(self) -> None:
        super().__init__("model_host_requests")
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
            ["model"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.run_seconds = Histogram(
            "model_host_inference_seconds", "Duration of one model call", ["model"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
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

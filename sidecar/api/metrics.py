"""Prometheus metrics: request counts, per-stage latency from the trace, zones, LLM, caches,
answers and MCP tool calls."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from models.web.metrics import LATENCY_BUCKETS, AppMetrics
from sidecar.core.trace import Trace

# An answer's times are an LLM's: from a fraction of a second to the 20 s deadline and past it.
ANSWER_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0)


class Metrics(AppMetrics):
    """The API's metrics: requests (shared with the model host), stages, zones, LLM, caches.

    Under gunicorn with several workers, ``PROMETHEUS_MULTIPROC_DIR`` is set and every worker's
    samples are aggregated at scrape time.
    """

    def __init__(self) -> None:
        super().__init__("sidecar_http_requests", multiprocess=True)
        r = self.registry
        self.stage_seconds = Histogram("sidecar_stage_seconds", "Pipeline stage latency",
                                       ["step", "status"], buckets=LATENCY_BUCKETS, registry=r)
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
        self.answers = Counter("sidecar_answers", "Answers (/v1/answer) by outcome",
                               ["outcome"], registry=r)
        self.answer_first_token = Histogram(
            "sidecar_answer_first_token_seconds", "Time from the LLM call to its first token",
            buckets=ANSWER_BUCKETS, registry=r)
        self.answer_seconds = Histogram(
            "sidecar_answer_seconds", "An answer's total time, from its request, by outcome",
            ["outcome"], buckets=ANSWER_BUCKETS, registry=r)
        self.mcp_tool_calls = Counter(
            "sidecar_mcp_tool_calls", "MCP tool calls by tool and outcome (ok, invalid, "
            "refused, unavailable, error)",
            ["tool", "outcome"], registry=r)

    def observe_trace(self, trace: Trace) -> None:
        """Record every stage of a finished request."""
        for step in trace.steps:
            if step.status != "skipped":
                self.stage_seconds.labels(step.step, step.status).observe(step.ms / 1000.0)
            if step.status == "error":
                self.fallbacks.labels(step.step, "error").inc()

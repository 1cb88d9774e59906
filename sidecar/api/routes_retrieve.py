"""POST /v1/retrieve: condense, gate, rerank, zones and evidence for the forum's assistant."""

from __future__ import annotations

from flask import Blueprint
from flask.typing import ResponseReturnValue

from sidecar.answer.pipeline_types import RetrievalOutcome
from sidecar.api.context import get_metrics, get_resources, parse_body, respond
from sidecar.api.metrics import Metrics
from sidecar.api.openapi import BODY_ERRORS, documented
from sidecar.api.schemas import RetrieveRequest, RetrieveResponse
from sidecar.core.condense import Turn

bp = Blueprint("retrieve", __name__)

def observe(metrics: Metrics, outcome: RetrievalOutcome) -> None:
    """Count one retrieval: stage latencies, zone, gate, condensing, LLM calls and fallbacks.

    Stage errors (a failed LLM call, a broken cross-encoder) are counted by ``observe_trace``
    as ``sidecar_fallbacks{step, reason="error"}``; deliberate fallbacks (no LLM configured,
    budget spent) are counted here under their reason, so each degraded stage counts once.
    """
    metrics.observe_trace(outcome.trace)
    metrics.zones.labels(outcome.zone.value).inc()
    if outcome.gate.reason is not None:
        metrics.gate.labels(outcome.gate.reason.value).inc()
    condensed = outcome.condensed
    if condensed is None:
        return
    metrics.condense.labels(condensed.source).inc()
    if condensed.cache in {"hit", "miss", "error"}:
        metrics.cache.labels("condense", condensed.cache).inc()
    if condensed.llm_call is not None:
        metrics.llm_calls.labels(condensed.llm_call).inc()
    if condensed.source == "fallback" and not condensed.failed and condensed.reason:
        metrics.fallbacks.labels("condense", condensed.reason.split(" ")[0]).inc()


@bp.post("/v1/retrieve")
@documented(tag="answer", request=RetrieveRequest, response=RetrieveResponse,
            errors=(*BODY_ERRORS, 503),
            summary="Evidence for the forum's assistant: standalone query, zone, numbered posts.")
def retrieve() -> ResponseReturnValue:
    """Run the retrieval pipeline on a conversation and return numbered evidence and a zone.

    A message stopped by the input gate is answered 200 with zone ``abstain`` and the gate's
    reason: it is a decision, not a client error. A malformed request is a 4xx.
    """
    body = parse_body(RetrieveRequest)
    turns = [Turn(m.role, m.content) for m in body.messages]
    outcome = get_resources().retrieval().retrieve(turns, body.limit, body.locale, body.asker)
    observe(get_metrics(), outcome)
    return respond(RetrieveResponse, outcome.as_dict())

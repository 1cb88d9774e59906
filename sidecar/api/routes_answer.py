"""POST /v1/answer: the retrieval, the LLM the zone allows and the sanitizer, in one call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, current_app
from flask.typing import ResponseReturnValue

from sidecar.answer.answer_service import Event
from sidecar.api.context import get_metrics, get_resources, parse_body, respond
from sidecar.api.metrics import Metrics
from sidecar.api.openapi import BODY_ERRORS, documented
from sidecar.api.routes_retrieve import observe
from sidecar.api.schemas_answer import AnswerRequest, AnswerResponse
from sidecar.core.condense import Turn

bp = Blueprint("answer", __name__)


def observe_answer(metrics: Metrics, body: dict[str, Any]) -> None:
    """Count one ask (``/v1/answer``'s body) by outcome, with its time to first token and its
    total time."""
    outcome, timings = body["outcome"], body["timings"]
    metrics.answers.labels(outcome).inc()
    if timings["first_token_ms"] is not None:
        metrics.answer_first_token.observe(timings["first_token_ms"] / 1000.0)
    if timings["total_ms"] is not None:
        metrics.answer_seconds.labels(outcome).observe(timings["total_ms"] / 1000.0)


def _sse(events: Iterator[Event], metrics: Metrics) -> Iterator[str]:
    """Server-Sent Events; the last one, the whole answer, is counted. A client that leaves
    closes this generator at the next write: counted and logged ``cancelled``."""
    finished = False
    try:
        for name, data in events:
            if name == "answer":
                observe_answer(metrics, data)
                finished = True
            yield f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
    finally:
        if not finished:  # the client left (or the stream broke) before the answer
            metrics.answers.labels("cancelled").inc()
            close = getattr(events, "close", None)
            if callable(close):
                close()  # the service logs the ask cancelled and stops the LLM call


@bp.post("/v1/answer")
@documented(tag="answer", request=AnswerRequest, response=AnswerResponse,
            errors=(*BODY_ERRORS, 429, 503), streams=True,
            summary="An answer ready to post: the zone decides what the LLM is asked (abstain: "
                    "no LLM call), the reply is sanitized and logged; streamed on request.")
def answer() -> ResponseReturnValue:
    """Answer a member's conversation from the forum's public posts.

    A 429 (with Retry-After) comes before anything is retrieved or asked: the asker asked too
    often, or the node's LLM calls in flight are at their cap. Without an LLM it is a 503 that
    names the setting.
    """
    body = parse_body(AnswerRequest)
    res = get_resources()
    service = res.answerer()
    ticket = service.admit(body.asker)
    try:
        turns = [Turn(m.role, m.content) for m in body.messages]
        retrieval = service.retrieve(turns, body.limit, body.locale, body.asker)
    except BaseException:
        ticket.release()
        raise
    metrics = get_metrics()
    observe(metrics, retrieval)
    if body.stream:
        response = current_app.response_class(
            _sse(service.events(ticket, retrieval), metrics), mimetype="text/event-stream")
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
        return response
    body_out = service.answer(ticket, retrieval).as_dict()
    observe_answer(metrics, body_out)
    return respond(AnswerResponse, body_out)

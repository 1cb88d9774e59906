"""`GET /v1/topics/<id>/related` and `POST /v1/similar`: related topics, and "already asked?"
while a member writes a topic (docs/related.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

from flask import Blueprint, current_app
from flask.typing import ResponseReturnValue

from sidecar.api.context import get_metrics, get_resources, parse_body, parse_query, respond
from sidecar.api.openapi import BODY_ERRORS, documented
from sidecar.api.schemas_related import (
    RelatedQuery,
    RelatedResponse,
    SimilarRequest,
    SimilarResponse,
)
from sidecar.related.service import RelatedService
from sidecar.related.similar import SimilarService

bp = Blueprint("related", __name__)

_SERVICES = "sidecar_related"
_LOCK = threading.Lock()


def services() -> tuple[RelatedService, SimilarService]:
    """The app's two services, built on first use from its resources."""
    built: tuple[RelatedService, SimilarService] | None = current_app.extensions.get(_SERVICES)
    if built is None:
        with _LOCK:
            built = current_app.extensions.get(_SERVICES)
            if built is None:
                res = get_resources()
                built = (RelatedService(res), SimilarService(res))
                current_app.extensions[_SERVICES] = built
    return built


@bp.get("/v1/topics/<int:topic_id>/related")
@documented(tag="search", query=RelatedQuery, response=RelatedResponse,
            errors=(400, 401, 404, 422, 503),
            summary="Public topics related to a public topic, from its stored vector (no model "
                    "call); 404 for a topic that is missing or not public alike.")
def related(topic_id: int) -> ResponseReturnValue:
    """Rank (or read from the cache) and show the topics related to ``topic_id``."""
    started = time.perf_counter()
    query = parse_query(RelatedQuery)
    service, _ = services()
    outcome = service.related(topic_id, query.limit, closed=query.closed,
                              archived=query.archived)
    metrics = get_metrics()
    metrics.observe_trace(outcome.trace)
    if outcome.cache in ("hit", "miss"):
        metrics.cache.labels("related", outcome.cache).inc()
    res = get_resources()
    return respond(RelatedResponse, {
        "topic_id": outcome.source.topic_id, "title": outcome.source.title,
        "model": res.model.name, "strategy": res.settings.strategy,
        "config": outcome.config.describe(), "cache": outcome.cache,
        "results": outcome.results, "trace": outcome.trace.as_list(),
        "took_ms": round((time.perf_counter() - started) * 1000, 2),
    })


@bp.post("/v1/similar")
@documented(tag="search", request=SimilarRequest, response=SimilarResponse,
            errors=(*BODY_ERRORS, 503),
            summary="Topics that may already answer a topic being written; an empty list when "
                    "none is close enough.")
def similar() -> ResponseReturnValue:
    """Search with the title and body; keep the topics that reach the threshold."""
    started = time.perf_counter()
    body = parse_body(SimilarRequest)
    _, service = services()
    outcome = service.similar(body.title, body.raw, body.limit)
    get_metrics().observe_trace(outcome.trace)
    results: list[dict[str, Any]] = []
    for rank, r in enumerate(outcome.results, start=1):
        hit = r.as_dict(rank)
        results.append({key: hit[key] for key in ("rank", "topic_id", "title", "slug",
                                                  "category", "score", "url", "post")}
                       | {"similarity": round(r.topic.similarity or 0.0, 6),
                          "topic_url": f"{service.settings.forum_url}/t/{r.post.slug}/"
                                       f"{r.post.topic_id}"})
    return respond(SimilarResponse, {
        "title": outcome.title, "silent": not results,
        "threshold": round(outcome.threshold, 6), "threshold_source": outcome.threshold_source,
        "best_similarity": None if outcome.best is None else round(outcome.best, 6),
        "model": get_resources().model.name, "results": results,
        "trace": outcome.trace.as_list(),
        "took_ms": round((time.perf_counter() - started) * 1000, 2),
    })

"""`POST /v1/search`: hybrid, semantic or keyword search with topic aggregation."""

from __future__ import annotations

import time

from flask import Blueprint
from flask.typing import ResponseReturnValue

from sidecar.api.context import get_metrics, get_resources, parse_body, respond
from sidecar.api.openapi import BODY_ERRORS, documented
from sidecar.api.schemas import SearchRequest, SearchResponse

bp = Blueprint("search", __name__)


@bp.post("/v1/search")
@documented(tag="search", request=SearchRequest, response=SearchResponse,
            errors=(*BODY_ERRORS, 503),
            summary="Search public posts; one entry per topic, linked at post level.")
def search() -> ResponseReturnValue:
    """Run the search and return topics with their best post's excerpt and link."""
    started = time.perf_counter()
    body = parse_body(SearchRequest)
    res = get_resources()
    options = body.options()
    results, trace = res.search.search(body.query, body.limit, options, details=body.details)
    get_metrics().observe_trace(trace)
    config = res.search.config(options, details=res.search.check_details(body.details) is not None)
    return respond(SearchResponse, {
        "query": res.search.check_query(body.query),
        "mode": config.mode.value,
        "config": config.describe(),
        "strategy": body.strategy or res.settings.strategy,
        "model": res.model.name,
        "results": [r.as_dict(rank) for rank, r in enumerate(results, start=1)],
        "trace": trace.as_list(),
        "took_ms": round((time.perf_counter() - started) * 1000, 2),
    })

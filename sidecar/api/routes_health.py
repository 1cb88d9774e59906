"""Health, readiness, the OpenAPI description and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app
from flask.typing import ResponseReturnValue

from models.runtime import runtime_report
from sidecar import __version__
from sidecar.api.auth import api_key_guard
from sidecar.api.context import get_metrics, get_resources, respond
from sidecar.api.openapi import build_spec, documented
from sidecar.api.schemas import HealthResponse, OpenAPIDocument, ReadyResponse

bp = Blueprint("health", __name__)


def _model_info() -> dict[str, Any]:
    res = get_resources()
    info: dict[str, Any] = {
        "embedder": {"name": res.model.name, "model_id": res.model.id,
                     "dimensions": res.model.dimensions, "provider": res.embedder.provider,
                     **({"served_by": res.served.describe()} if res.served else {})},
        "reranker": None,
    }
    if res.reranker is not None:
        info["reranker"] = {"name": res.reranker.name, "provider": res.reranker.provider}
    elif res.reranker_error:
        info["reranker"] = {"error": res.reranker_error}
    return info


@bp.get("/v1/health")
@documented(tag="operations", auth=None, response=HealthResponse, errors=(),
            summary="Liveness. With the API key: version, which models and execution providers "
                    "are in use (and why a model failed to load), what search serves, and this "
                    "node's keyword index (documents, last sync).")
def health() -> ResponseReturnValue:
    """The process is up; with the API key, says what it runs on.

    Open to load balancers without a key, so it says nothing else then: load errors name files
    and versions help an attacker pick an exploit.
    """
    res = get_resources()
    if not api_key_guard().present():  # a wrong key here counts as a guess too
        return respond(HealthResponse, {"status": "ok"})
    return respond(HealthResponse, {
        "status": "ok",
        "version": __version__,
        "database": "embedded" if res.urls.embedded_database else "external",
        "redis": "embedded" if res.urls.embedded_redis else "external",
        "pgvector": res.pgvector,
        "models": _model_info(),
        "search": res.profile.describe(),
        "onnxruntime": runtime_report(),
        "keyword_index": res.search.keyword.describe(),
    })


@bp.get("/v1/ready")
@documented(tag="operations", auth=None, response=ReadyResponse, also=(503,), errors=(),
            summary="Readiness: 200 when the database and Redis answer, else 503.")
def ready() -> ResponseReturnValue:
    """Ready to serve: every dependency answers."""
    res = get_resources()
    checks = {"database": res.db.ping()}
    try:
        checks["redis"] = bool(res.redis.ping())
    except Exception:  # readiness reports, it does not raise
        checks["redis"] = False
    ok = all(checks.values())
    return respond(ReadyResponse, {"ready": ok, "checks": checks}, 200 if ok else 503)


@bp.get("/v1/openapi.json")
@documented(tag="operations", response=OpenAPIDocument, errors=(401,),
            summary="This API's OpenAPI 3.1 description.")
def openapi() -> ResponseReturnValue:
    """The OpenAPI document, read from this app's routes."""
    return respond(OpenAPIDocument, build_spec(current_app, "forum-rag-sidecar", __version__))


@bp.get("/metrics")
@documented(tag="operations", content_type="text/plain", errors=(401, 429),
            summary="Prometheus metrics (with the API key: they name the models, the "
                    "backfill's state and the database's connections).")
def metrics() -> ResponseReturnValue:
    """Prometheus exposition format; the database's part read at most once per
    ``SIDECAR_METRICS_STATE_TTL_S``, outside the API's pool (:mod:`sidecar.api.metrics_state`)."""
    return get_metrics().response()

"""The TEI-compatible model host: ``/``, ``/embed``, ``/rerank``, ``/tokenize``, ``/info``,
``/health``, and OpenAI's ``/v1/embeddings`` (:mod:`models.host.openai_routes`).

The request and response bodies are those of Hugging Face text-embeddings-inference, so a
client written for TEI works against this host and our :mod:`models.client` works against a
real TEI. Differences are additive: ``/info`` also says which execution provider runs the model,
the vector size and the query/passage prompts, and one host may serve an embedder and a
cross-encoder together (``/info`` then lists both under ``models``).
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any, TypeVar

import numpy as np
from flask import Flask, Response, request

from models.host.config import HostConfig
from models.host.engines import EmbedEngine, RerankEngine, normalize_rows
from models.host.errors import (
    HostError,
    invalid,
    register_error_handlers,
)
from models.host.handling import (
    cap_chars,
    check_direction,
    gather,
    json_response,
    prompt_kind,
    refuse_over_long,
    texts_of,
)
from models.host.metrics import HostMetrics
from models.host.openai_routes import register_openai_routes
from models.host.schemas import EmbedRequest, RerankRequest, TokenizeRequest
from models.host.state import HostState
from models.host.tokens import CharBudget, body_limit, check_size, tokens_json
from models.protocols import Embedder, Reranker
from models.web.auth import request_bearer, token_matches

R = TypeVar("R")


def _local(address: str | None) -> bool:
    """A client on this machine: loopback, or a unix socket (no address; its file's mode
    guards it)."""
    if not address:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def _authenticate(config: HostConfig) -> None:
    # /health is always open (load balancers); /metrics to this machine only, else with the
    # key: its counters tell who calls the host and how much, and it is no one else's business.
    endpoint = request.endpoint
    if endpoint == "health" or (endpoint == "metrics" and _local(request.remote_addr)):
        return
    if config.api_key is None:
        if endpoint == "metrics":
            raise HostError(403, "forbidden", "/metrics answers this machine only while no "
                            "key is set: set SIDECAR_MODEL_HOST_API_KEY and send it")
        return
    if not token_matches(request_bearer(), config.api_key):
        raise HostError(401, "unauthorized", "missing or wrong API key (Authorization: Bearer)")


def create_host_app(
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    config: HostConfig | None = None,
    *,
    settings: Any = None,
) -> Flask:
    """Build the model host over loaded models (at least one).

    ``config`` sets limits and batching; without it, ``settings`` (the sidecar's) provides the
    ``model_host_*`` values, else the defaults apply. Call :func:`close_host_app` to stop the
    batchers' threads.
    """
    if embedder is None and reranker is None:
        raise ValueError("the model host needs an embedder, a reranker, or both")
    if config is None:
        config = HostConfig.from_settings(settings) if settings is not None else HostConfig()
    metrics = HostMetrics()
    state = HostState(
        config=config, metrics=metrics,
        embed=EmbedEngine(embedder, config, metrics) if embedder is not None else None,
        rerank=RerankEngine(reranker, config, metrics) if reranker is not None else None,
        tokenize_budget=CharBudget(config.tokenize_slots * config.max_input_chars),
    )  # fmt: skip
    app = Flask("model_host")
    app.config["MAX_CONTENT_LENGTH"] = config.max_request_bytes
    app.extensions["model_host"] = state
    register_error_handlers(app)
    app.before_request(lambda: _authenticate(config))

    metrics.bind(app)

    @app.post("/embed")
    def embed() -> Response:
        engine = state.require_embed()
        with engine.batcher.incoming() as ticket:
            req = EmbedRequest.model_validate_json(request.get_data())
            check_direction(req.truncation_direction)
            kind = prompt_kind(req.prompt_name, engine)
            truncate = bool(req.truncate)
            texts = [cap_chars(t, f"inputs[{i}]", config, truncate)
                     for i, t in enumerate(texts_of(req.inputs, config))]  # fmt: skip
            if not truncate:
                refuse_over_long(texts, lambda t: engine.tokens_over(t, kind),
                                  "`inputs[{i}]` has {n} tokens; the model takes at most {m} "
                                  "(send truncate=true to cut it)")
            futures = ticket.submit([(text, kind) for text in texts])
        vectors = gather(futures, config.request_timeout_s)
        matrix = normalize_rows(vectors) if req.normalize else np.stack(vectors)
        return json_response(matrix.tolist())

    @app.post("/rerank")
    def rerank() -> Response:
        engine = state.require_rerank()
        with engine.batcher.incoming() as ticket:
            req = RerankRequest.model_validate_json(request.get_data())
            check_direction(req.truncation_direction)
            if not req.query.strip():
                raise invalid("`query` is empty or whitespace only")
            truncate = bool(req.truncate)
            query = cap_chars(req.query, "query", config, truncate)
            texts = [cap_chars(t, f"texts[{i}]", config, truncate)
                     for i, t in enumerate(texts_of(req.texts, config, "texts"))]  # fmt: skip
            if not truncate:
                refuse_over_long(texts, lambda t: engine.tokens_over(query, t),
                                  "query + `texts[{i}]` have {n} tokens; the model takes at "
                                  "most {m} (send truncate=true to cut the text)")
            futures = ticket.submit([(query, text) for text in texts])
        logits = gather(futures, config.request_timeout_s)
        # TEI: raw_scores=false gives the sigmoid of the single logit.
        scores = logits if req.raw_scores else [1.0 / (1.0 + math.exp(-x)) for x in logits]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        ranks = [{"index": i, **({"text": req.texts[i]} if req.return_text else {}),
                  "score": scores[i]} for i in order]  # fmt: skip
        return json_response(ranks)

    @app.post("/")
    def predict() -> Response:
        # TEI's root route runs the model it serves: /embed for an embedding model, /rerank for
        # a re-ranker. This host may serve both: then the body says which (a `query` is a
        # rerank request, as TEI's bodies differ by it).
        if state.embed is None or state.rerank is None:
            return embed() if state.embed is not None else rerank()
        body = request.get_json(silent=True)
        return rerank() if isinstance(body, dict) and "query" in body else embed()

    @app.post("/tokenize")
    def tokenize() -> Response:
        engine = state.embed
        tokenizer = engine.tokenizer if engine is not None else None
        if engine is None or tokenizer is None:
            raise HostError(424, "backend", "this host has no embedding model with a tokenizer")
        # Limits like the other routes' (models/host/tokens.py): body, characters, budget.
        request.max_content_length = body_limit(config)
        req = TokenizeRequest.model_validate_json(request.get_data())
        prefix = engine.prompts[prompt_kind(req.prompt_name, engine)] if req.prompt_name else ""
        texts = [cap_chars(t, f"inputs[{i}]", config, False)
                 for i, t in enumerate(texts_of(req.inputs, config))]  # fmt: skip
        with state.tokenize_budget.hold(check_size(texts, prefix, config)):
            body = tokens_json(tokenizer, texts, prefix, req.add_special_tokens)
        return Response(body, mimetype="application/json")

    @app.get("/info")
    def info() -> Response:
        parts = {name: engine.info() for name, engine in
                 (("embed", state.embed), ("rerank", state.rerank)) if engine is not None}
        top = parts.get("embed") or parts["rerank"]
        return json_response({**top, "models": parts})

    @app.get("/health")
    def health() -> Response:
        dead = [e.batcher.name for e in (state.embed, state.rerank)
                if e is not None and not e.batcher.alive]  # fmt: skip
        if dead:
            raise HostError(503, "unhealthy", f"model worker stopped: {', '.join(dead)}")
        return json_response({"status": "ok"})

    register_openai_routes(app, state)

    @app.get("/metrics", endpoint="metrics")
    def metrics_route() -> Response:
        return metrics.response()

    return app


def close_host_app(app: Flask) -> None:
    """Stop the worker threads of a host app (tests, benchmarks, shutdown)."""
    state: HostState | None = app.extensions.get("model_host")
    if state is not None:
        state.close()

"""The TEI-compatible model host: ``/embed``, ``/rerank``, ``/tokenize``, ``/info``, ``/health``.

The request and response bodies are those of Hugging Face text-embeddings-inference, so a
client written for TEI works against this host and our :mod:`models.client` works against a
real TEI. Differences are additive: ``/info`` also says which execution provider runs the model,
the vector size and the query/passage prompts, and one host may serve an embedder and a
cross-encoder together (``/info`` then lists both under ``models``).
"""

from __future__ import annotations

import hmac
import json
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from flask import Flask, Response, request

from models.errors import ModelInputError
from models.host.config import HostConfig
from models.host.engines import EmbedEngine, Kind, RerankEngine, normalize_rows
from models.host.errors import (
    HostError,
    ModelCallFailed,
    invalid,
    register_error_handlers,
    too_large,
)
from models.host.metrics import HostMetrics
from models.host.schemas import EmbedRequest, RerankRequest, TokenizeRequest
from models.protocols import Embedder, Reranker

R = TypeVar("R")
_OPEN_ENDPOINTS = frozenset({"health", "metrics"})


@dataclass
class HostState:
    """What the routes share: the engines, the limits and the metrics."""

    config: HostConfig
    metrics: HostMetrics
    embed: EmbedEngine | None
    rerank: RerankEngine | None

    def require_embed(self) -> EmbedEngine:
        if self.embed is None:
            raise HostError(424, "backend", "this host serves no embedding model")
        return self.embed

    def require_rerank(self) -> RerankEngine:
        if self.rerank is None:
            raise HostError(424, "backend", "model is not a re-ranker model")
        return self.rerank

    def close(self) -> None:
        """Stop the batchers' worker threads."""
        for engine in (self.embed, self.rerank):
            if engine is not None:
                engine.batcher.close()


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":"), ensure_ascii=False), status=status,
                    mimetype="application/json")  # fmt: skip


def _texts(inputs: str | list[str], config: HostConfig, what: str = "inputs") -> list[str]:
    """The inputs as a list, refused when empty, too many, or holding an empty text."""
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not texts:
        raise invalid(f"`{what}` cannot be empty")
    if len(texts) > config.max_inputs:
        raise too_large(
            f"batch size {len(texts)} > maximum allowed batch size {config.max_inputs}"
        )
    for index, text in enumerate(texts):
        if not text.strip():
            raise invalid(f"`{what}[{index}]` is empty or whitespace only")
    return texts


def _cap_chars(text: str, where: str, config: HostConfig, truncate: bool) -> str:
    if len(text) <= config.max_input_chars:
        return text
    if truncate:
        # The tokenizer never sees more than this; the model's own limit is far smaller.
        return text[: config.max_input_chars]
    raise too_large(f"`{where}` has {len(text)} characters; the limit is "
                    f"{config.max_input_chars} (send truncate=true to cut it)")  # fmt: skip


def _check_direction(direction: str) -> None:
    if direction.lower() != "right":
        raise invalid("only truncation_direction=Right is supported by this host")


def _kind(prompt_name: str | None, engine: EmbedEngine) -> Kind:
    # Without a prompt name the passage prompt applies: what the in-process embedder does.
    if prompt_name is None or prompt_name in ("passage", "document"):
        return "passage"
    if prompt_name == "query":
        return "query"
    raise invalid(f"unknown prompt_name {prompt_name!r}; this host knows: query, passage")


def _gather(futures: Sequence[Future[R]], timeout: float) -> list[R]:
    """Results of a request's items; model failures become 424, a stuck model 503."""
    deadline = time.monotonic() + timeout
    results: list[R] = []
    try:
        for future in futures:
            results.append(future.result(max(0.0, deadline - time.monotonic())))
    except FutureTimeout:
        for future in futures:
            future.cancel()
        raise HostError(503, "unhealthy", f"no result within {timeout:.0f}s; the model is "
                        "stuck or overloaded") from None  # fmt: skip
    except ModelInputError as exc:
        raise invalid(str(exc)) from exc
    except HostError:
        raise
    except Exception as exc:
        raise ModelCallFailed(f"inference failed: {type(exc).__name__}: {exc}") from exc
    return results


def _authenticate(config: HostConfig) -> None:
    if config.api_key is None or request.endpoint in _OPEN_ENDPOINTS:
        return
    header = request.headers.get("Authorization", "")
    if not hmac.compare_digest(header.encode(), f"Bearer {config.api_key}".encode()):
        raise HostError(401, "unauthorized", "missing or wrong API key (Authorization: Bearer)")



def _refuse_over_long(
    texts: list[str], tokens_over: Callable[[str], tuple[int, int] | None], message: str
) -> None:
    """With ``truncate: false``, an input over the model's maximum is a 413 (TEI's answer).

    ``tokens_over`` gives (tokens, maximum) for a text over the limit, else None; ``message``
    is formatted with the input's index ``i``, its token count ``n`` and the maximum ``m``.
    """
    for index, text in enumerate(texts):
        over = tokens_over(text)
        if over:
            raise too_large(message.format(i=index, n=over[0], m=over[1]))


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
    )  # fmt: skip
    app = Flask("model_host")
    app.config["MAX_CONTENT_LENGTH"] = config.max_request_bytes
    app.extensions["model_host"] = state
    register_error_handlers(app)
    app.before_request(lambda: _authenticate(config))

    @app.after_request
    def _count(response: Response) -> Response:
        route = request.url_rule.rule if request.url_rule else "unmatched"
        metrics.requests.labels(route, str(response.status_code)).inc()
        return response

    @app.post("/embed")
    def embed() -> Response:
        engine = state.require_embed()
        with engine.batcher.incoming() as ticket:
            req = EmbedRequest.model_validate_json(request.get_data())
            _check_direction(req.truncation_direction)
            kind = _kind(req.prompt_name, engine)
            truncate = bool(req.truncate)
            texts = [_cap_chars(t, f"inputs[{i}]", config, truncate)
                     for i, t in enumerate(_texts(req.inputs, config))]  # fmt: skip
            if not truncate:
                _refuse_over_long(texts, lambda t: engine.tokens_over(t, kind),
                                  "`inputs[{i}]` has {n} tokens; the model takes at most {m} "
                                  "(send truncate=true to cut it)")
            futures = ticket.submit([(text, kind) for text in texts])
        vectors = _gather(futures, config.request_timeout_s)
        matrix = normalize_rows(vectors) if req.normalize else np.stack(vectors)
        return _json(matrix.tolist())

    @app.post("/rerank")
    def rerank() -> Response:
        engine = state.require_rerank()
        with engine.batcher.incoming() as ticket:
            req = RerankRequest.model_validate_json(request.get_data())
            _check_direction(req.truncation_direction)
            if not req.query.strip():
                raise invalid("`query` is empty or whitespace only")
            truncate = bool(req.truncate)
            query = _cap_chars(req.query, "query", config, truncate)
            texts = [_cap_chars(t, f"texts[{i}]", config, truncate)
                     for i, t in enumerate(_texts(req.texts, config, "texts"))]  # fmt: skip
            if not truncate:
                _refuse_over_long(texts, lambda t: engine.tokens_over(query, t),
                                  "query + `texts[{i}]` have {n} tokens; the model takes at "
                                  "most {m} (send truncate=true to cut the text)")
            futures = ticket.submit([(query, text) for text in texts])
        logits = _gather(futures, config.request_timeout_s)
        # TEI: raw_scores=false gives the sigmoid of the single logit.
        scores = logits if req.raw_scores else [1.0 / (1.0 + math.exp(-x)) for x in logits]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        ranks = [{"index": i, **({"text": req.texts[i]} if req.return_text else {}),
                  "score": scores[i]} for i in order]  # fmt: skip
        return _json(ranks)

    @app.post("/tokenize")
    def tokenize() -> Response:
        engine = state.embed
        tokenizer = engine.tokenizer if engine is not None else None
        if engine is None or tokenizer is None:
            raise HostError(424, "backend", "this host has no embedding model with a tokenizer")
        req = TokenizeRequest.model_validate_json(request.get_data())
        prefix = engine.prompts[_kind(req.prompt_name, engine)] if req.prompt_name else ""
        texts = [_cap_chars(t, f"inputs[{i}]", config, False)
                 for i, t in enumerate(_texts(req.inputs, config))]  # fmt: skip
        return _json([
            [{"id": t.id, "text": t.text, "special": t.special, "start": t.start, "stop": t.stop}
             for t in tokenizer.describe(prefix + text, req.add_special_tokens)]
            for text in texts
        ])

    @app.get("/info")
    def info() -> Response:
        parts = {name: engine.info() for name, engine in
                 (("embed", state.embed), ("rerank", state.rerank)) if engine is not None}
        top = parts.get("embed") or parts["rerank"]
        return _json({**top, "models": parts})

    @app.get("/health")
    def health() -> Response:
        dead = [e.batcher.name for e in (state.embed, state.rerank)
                if e is not None and not e.batcher.alive]  # fmt: skip
        if dead:
            raise HostError(503, "unhealthy", f"model worker stopped: {', '.join(dead)}")
        return _json({"status": "ok"})

    @app.get("/metrics", endpoint="metrics")
    def metrics_route() -> Response:
        return Response(metrics.render(), mimetype="text/plain; version=0.0.4")

    return app


def close_host_app(app: Flask) -> None:
    """Stop the worker threads of a host app (tests, benchmarks, shutdown)."""
    state: HostState | None = app.extensions.get("model_host")
    if state is not None:
        state.close()

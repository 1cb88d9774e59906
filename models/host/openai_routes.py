"""OpenAI-compatible routes of the model host: ``POST /v1/embeddings`` and ``GET /v1/models``.

What most embedding clients speak (the openai package, LangChain, LlamaIndex...), as TEI, vLLM
and infinity serve it. Texts over the model's window are cut to it, as Ollama does and TEI does
with ``--auto-truncate``: an OpenAI client has no way to ask for it. Errors have OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``, see :mod:`models.host.errors`).
"""

from __future__ import annotations

import base64

from flask import Flask, Response, request

from models.host.engines import normalize_rows
from models.host.errors import invalid
from models.host.handling import cap_chars, gather, json_response, texts_of
from models.host.schemas import OpenAIEmbeddingRequest
from models.host.state import HostState


def _texts(req: OpenAIEmbeddingRequest) -> list[str] | str:
    """The request's texts; token ids are refused."""
    value = req.input
    if isinstance(value, list) and any(not isinstance(item, str) for item in value):
        raise invalid("`input` holds token ids; this host takes texts (a string or a list of "
                      "strings)")
    return value  # type: ignore[return-value]  # str or list[str], checked above


def register_openai_routes(app: Flask, state: HostState) -> None:
    """Add the OpenAI-compatible routes to the host app."""
    config = state.config

    @app.post("/v1/embeddings")
    def openai_embeddings() -> Response:
        engine = state.require_embed()
        with engine.batcher.incoming() as ticket:
            req = OpenAIEmbeddingRequest.model_validate_json(request.get_data())
            if req.dimensions is not None and req.dimensions != engine.model.dimensions:
                raise invalid(f"`dimensions` must be {engine.model.dimensions} for this model "
                              "(it cannot shorten its vectors)")
            texts = [cap_chars(t, f"input[{i}]", config, True)
                     for i, t in enumerate(texts_of(_texts(req), config, "input"))]
            futures = ticket.submit([(text, "passage") for text in texts])
        matrix = normalize_rows(gather(futures, config.request_timeout_s))
        tokens = sum(engine.tokens_seen(text) for text in texts)
        if req.encoding_format == "base64":  # little-endian float32, as OpenAI sends it
            vectors: list[object] = [base64.b64encode(row.astype("<f4").tobytes()).decode()
                                     for row in matrix]
        else:
            vectors = matrix.tolist()
        return json_response({
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v}
                     for i, v in enumerate(vectors)],
            "model": engine.model.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })

    @app.get("/v1/models")
    def openai_models() -> Response:
        served = [e.model for e in (state.embed, state.rerank) if e is not None]
        return json_response({"object": "list", "data": [
            # max_model_len: as vLLM says it; our client reads the model's window from it.
            {"id": m.name, "object": "model", "created": 0, "owned_by": "forum-rag-sidecar",
             "max_model_len": int(getattr(m, "max_length", 0)) or None} for m in served]})

"""The model host speaks TEI: shapes, values, limits, and a JSON 4xx for every bad input."""

from __future__ import annotations

import math
from typing import Any

import httpx
import numpy as np
import pytest

from models import OnnxCrossEncoder, OnnxEmbedder, load_embedder
from models.host import ThreadedHost, close_host_app, create_host_app
from tests.modelhost.conftest import make_app

TEXTS = [
    "How do I replace a failed disk in a ZFS mirror?",
    "Le NAS redémarre tout seul depuis la mise à jour.",
    "東京は日本の首都です。",
    "ok",
]


@pytest.fixture(scope="module")
def http(served: ThreadedHost) -> Any:
    with httpx.Client(base_url=served.url, timeout=60) as client:
        yield client


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = resp.json()
    assert set(body) == {"error", "error_type"} and body["error"], body
    return body


def test_info_is_tei_shaped_and_says_where_models_run(http: httpx.Client) -> None:
    info = http.get("/info").json()
    assert info["model_id"] == "all-minilm-l6-v2"
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["max_input_length"] == 256 and info["max_client_batch_size"] == 512
    assert info["dimensions"] == 384 and info["provider"] == "cpu"
    assert info["model_dtype"] == "float32" and info["auto_truncate"] is False
    rerank = info["models"]["rerank"]
    assert rerank["model_id"] == "tiny-cross-encoder-seed3"
    assert set(rerank["model_type"]) == {"reranker"} and rerank["provider"] == "cpu"
    assert http.get("/health").json() == {"status": "ok"}


def test_provider_is_the_one_actually_used(minilm_dir: Any, tiny_reranker: Any) -> None:
    # OpenVINO is not installed here: the session falls back to CPU and /info says so.
    fallback = load_embedder(minilm_dir, provider="openvino")
    app = create_host_app(fallback)
    assert app.test_client().get("/info").json["provider"] == "cpu"
    close_host_app(app)

    class OnGpu:  # whatever the model reports is what /info shows
        def __getattr__(self, name: str) -> Any:
            return getattr(tiny_reranker, name)

        provider = "cuda"

    app = create_host_app(None, OnGpu())
    info = app.test_client().get("/info").json
    assert info["provider"] == "cuda" and "reranker" in info["model_type"]
    close_host_app(app)


def test_embed_returns_the_in_process_vectors(http: httpx.Client, minilm: OnnxEmbedder) -> None:
    vectors = np.asarray(http.post("/embed", json={"inputs": TEXTS}).json(), dtype=np.float32)
    assert vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(vectors, minilm.embed(TEXTS), atol=1e-6)
    single = http.post("/embed", json={"inputs": TEXTS[0]}).json()
    assert len(single) == 1 and np.allclose(single[0], vectors[0], atol=1e-6)
    query = http.post("/embed", json={"inputs": TEXTS[0], "prompt_name": "query"}).json()
    np.testing.assert_allclose(query[0], minilm.embed(TEXTS[:1], kind="query")[0], atol=1e-6)


def test_normalize_false_gives_the_raw_pooled_vectors(
    http: httpx.Client, minilm: OnnxEmbedder
) -> None:
    raw = np.asarray(http.post("/embed", json={"inputs": TEXTS, "normalize": False}).json())
    norms = np.linalg.norm(raw, axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3)  # MiniLM's mean-pooled vectors are not unit
    np.testing.assert_allclose(raw, minilm.embed(TEXTS, normalize=False), atol=1e-5)
    np.testing.assert_allclose(raw / norms[:, None], minilm.embed(TEXTS), atol=1e-6)


def test_truncate_true_embeds_what_the_model_sees(
    http: httpx.Client, minilm: OnnxEmbedder
) -> None:
    long_text = "RAID rebuild speed depends on the slowest disk. " * 80
    got = http.post("/embed", json={"inputs": [long_text], "truncate": True}).json()[0]
    np.testing.assert_allclose(got, minilm.embed([minilm.truncate_text(long_text)])[0],
                               atol=1e-6)  # fmt: skip


def test_rerank_sorts_by_sigmoid_score_as_tei(
    http: httpx.Client, tiny_reranker: OnnxCrossEncoder
) -> None:
    query = "replace a failed disk"
    logits = tiny_reranker.score(query, TEXTS)
    ranks = http.post("/rerank", json={"query": query, "texts": TEXTS}).json()
    assert sorted(r["index"] for r in ranks) == list(range(len(TEXTS)))
    assert [r["score"] for r in ranks] == sorted((r["score"] for r in ranks), reverse=True)
    for rank in ranks:
        assert "text" not in rank
        expected = 1 / (1 + math.exp(-float(logits[rank["index"]])))
        assert rank["score"] == pytest.approx(expected, abs=1e-6)
    raw = http.post("/rerank", json={"query": query, "texts": TEXTS, "raw_scores": True,
                                     "return_text": True}).json()  # fmt: skip
    assert [r["index"] for r in raw] == [r["index"] for r in ranks]
    for rank in raw:
        assert rank["text"] == TEXTS[rank["index"]]
        assert rank["score"] == pytest.approx(float(logits[rank["index"]]), abs=1e-5)


def test_tokenize_gives_character_spans(http: httpx.Client, minilm: OnnxEmbedder) -> None:
    text = "Héllo wörld, 東京!"
    tokens = http.post("/tokenize", json={"inputs": text}).json()
    assert len(tokens) == 1
    first, *middle, last = tokens[0]
    assert first["special"] and last["special"] and first["start"] is None
    assert len(middle) == minilm.count_tokens(text)
    for token in middle:
        assert not token["special"] and text[token["start"]:token["stop"]] == token["text"]
    plain = http.post("/tokenize", json={"inputs": [text, "ok"],
                                         "add_special_tokens": False}).json()  # fmt: skip
    assert [len(t) for t in plain] == [len(middle), 1]


BAD_BODIES = [
    ("/embed", b"{not json", 400),
    ("/embed", b"", 400),
    ("/embed", b"[1, 2]", 422),
    ("/embed", b"{}", 422),
    ("/embed", b'{"inputs": []}', 422),
    ("/embed", b'{"inputs": [""]}', 422),
    ("/embed", b'{"inputs": "   "}', 422),
    ("/embed", b'{"inputs": 42}', 422),
    ("/embed", b'{"inputs": ["a", 3]}', 422),
    ("/embed", b'{"inputs": null}', 422),
    ("/embed", b'{"inputs": "a", "normalize": "yes"}', 422),
    ("/embed", b'{"inputs": "a", "truncate": 1}', 422),
    ("/embed", b'{"inputs": "a", "normalise": true}', 422),
    ("/embed", b'{"inputs": "a", "truncation_direction": "Left"}', 422),
    ("/embed", b'{"inputs": "a", "prompt_name": "summary"}', 422),
    ("/rerank", b'{"query": "", "texts": ["a"]}', 422),
    ("/rerank", b'{"query": "q", "texts": []}', 422),
    ("/rerank", b'{"query": "q", "texts": "a"}', 422),
    ("/rerank", b'{"query": "q", "texts": [null]}', 422),
    ("/rerank", b'{"query": "q", "texts": ["a", " "]}', 422),
    ("/rerank", b'{"query": "q", "texts": ["a"], "raw_scores": 1}', 422),
    ("/rerank", b'{"texts": ["a"]}', 422),
    ("/tokenize", b'{"inputs": []}', 422),
    ("/tokenize", b'{"inputs": {"a": 1}}', 422),
]


@pytest.mark.parametrize(("path", "body", "status"), BAD_BODIES)
def test_bad_input_is_a_json_4xx(http: httpx.Client, path: str, body: bytes, status: int) -> None:
    resp = http.post(path, content=body, headers={"Content-Type": "application/json"})
    assert _error(resp, status)["error_type"] == "validation"


def test_too_many_inputs_is_413_like_tei(minilm: OnnxEmbedder, tiny_reranker: Any) -> None:
    app = make_app(minilm, tiny_reranker, max_inputs=3, max_batch=2)
    client = app.test_client()
    resp = client.post("/embed", json={"inputs": ["a", "b", "c", "d"]})
    assert resp.status_code == 413 and "maximum allowed batch size 3" in resp.json["error"]
    assert client.post("/rerank", json={"query": "q", "texts": ["a"] * 4}).status_code == 413
    assert client.post("/tokenize", json={"inputs": ["a"] * 4}).status_code == 413
    ok = client.post("/embed", json={"inputs": ["a", "b", "c"]})  # split over 2 model calls
    assert ok.status_code == 200 and len(ok.json) == 3
    close_host_app(app)


def test_over_long_texts_are_413_unless_truncated(
    http: httpx.Client, minilm: OnnxEmbedder
) -> None:
    long_text = "word " * 300  # 300 tokens > 254
    body = _error(http.post("/embed", json={"inputs": ["ok", long_text], "truncate": False}),
                  413)  # fmt: skip
    assert "inputs[1]" in body["error"] and "300 tokens" in body["error"]
    assert http.post("/embed", json={"inputs": [long_text], "truncate": True}).status_code == 200
    _error(http.post("/rerank", json={"query": "q", "texts": [long_text]}), 413)
    assert http.post("/rerank", json={"query": "q", "texts": [long_text],
                                      "truncate": True}).status_code == 200  # fmt: skip


def test_character_limit_and_body_limit(minilm: OnnxEmbedder) -> None:
    app = make_app(minilm, max_input_chars=1000, max_request_bytes=20_000)
    client = app.test_client()
    text = "a " * 600  # 1200 characters
    resp = client.post("/embed", json={"inputs": [text], "truncate": False})
    assert resp.status_code == 413 and "1200 characters" in resp.json["error"]
    assert client.post("/embed", json={"inputs": [text], "truncate": True}).status_code == 200
    huge = client.post("/embed", json={"inputs": ["x" * 30_000], "truncate": True})
    assert huge.status_code == 413 and huge.json["error_type"] == "validation"
    close_host_app(app)


def test_routes_methods_and_missing_models_answer_json(
    http: httpx.Client, minilm: OnnxEmbedder, tiny_reranker: Any
) -> None:
    assert _error(http.get("/embed"), 405)["error_type"] == "method_not_allowed"
    assert _error(http.get("/nowhere"), 404)["error_type"] == "not_found"
    embed_only = make_app(minilm).test_client()
    resp = embed_only.post("/rerank", json={"query": "q", "texts": ["a"]})
    assert resp.status_code == 424 and resp.json["error_type"] == "backend"
    rerank_only = make_app(None, tiny_reranker).test_client()
    assert rerank_only.post("/embed", json={"inputs": "a"}).status_code == 424
    assert rerank_only.post("/tokenize", json={"inputs": "a"}).status_code == 424
    assert "reranker" in rerank_only.get("/info").json["model_type"]


def test_a_model_failure_is_a_424_and_the_host_stays_up(minilm: OnnxEmbedder) -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            return getattr(minilm, name)

        def embed(self, texts: Any, kind: str = "passage", normalize: Any = None) -> Any:
            raise RuntimeError("CUDA out of memory")

    app = make_app(Broken())
    client = app.test_client()
    resp = client.post("/embed", json={"inputs": ["a", "b"]})
    assert resp.status_code == 424 and resp.json["error_type"] == "backend"
    assert "CUDA out of memory" in resp.json["error"]
    assert client.get("/health").status_code == 200
    close_host_app(app)
    dead = client.get("/health")
    assert dead.status_code == 503 and dead.json["error_type"] == "unhealthy"


def test_api_key_protects_everything_but_health_and_local_metrics(
    minilm: OnnxEmbedder
) -> None:
    app = make_app(minilm, api_key="s3cret")
    client = app.test_client()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
        resp = client.post("/embed", json={"inputs": "a"}, headers=headers)
        assert resp.status_code == 401 and resp.json["error_type"] == "unauthorized"
    assert client.get("/info").status_code == 401
    assert client.get("/health").status_code == 200 and client.get("/metrics").status_code == 200
    # Off this machine, /metrics needs the key like the rest; /health stays open.
    remote = {"REMOTE_ADDR": "203.0.113.7"}
    assert client.get("/metrics", environ_base=remote).status_code == 401
    assert client.get("/metrics", environ_base=remote,
                      headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/health", environ_base=remote).status_code == 200
    for header in ("Bearer s3cret", "bearer s3cret", "BEARER  s3cret"):  # RFC 7235: any case
        ok = client.post("/embed", json={"inputs": "a"}, headers={"Authorization": header})
        assert ok.status_code == 200, header
    close_host_app(app)


def test_without_a_key_metrics_answer_this_machine_only(minilm: OnnxEmbedder) -> None:
    """A host opened on purpose (SIDECAR_MODEL_HOST_ALLOW_OPEN) still keeps its counters to
    itself: a unix socket or loopback sees them, another address does not."""
    app = make_app(minilm)
    client = app.test_client()
    for local in ("127.0.0.1", "::1", "::ffff:127.0.0.1", ""):
        assert client.get("/metrics", environ_base={"REMOTE_ADDR": local}).status_code == 200
    far = client.get("/metrics", environ_base={"REMOTE_ADDR": "198.51.100.4"})
    assert far.status_code == 403 and "SIDECAR_MODEL_HOST_API_KEY" in far.json["error"]
    assert client.get("/health", environ_base={"REMOTE_ADDR": "198.51.100.4"}).status_code == 200
    close_host_app(app)


def test_metrics_count_requests_and_batches(http: httpx.Client) -> None:
    http.post("/embed", json={"inputs": ["metrics one", "metrics two"]})
    text = http.get("/metrics").text
    assert 'model_host_requests_total{route="/embed",status="200"}' in text
    assert 'model_host_batch_items_count{model="embed"}' in text
    assert 'model_host_inference_seconds_bucket{le="0.001",model="embed"}' in text

"""TEI's `POST /` and OpenAI's `POST /v1/embeddings`, called by the real client libraries.

The official clients are the judges of compatibility: huggingface_hub's InferenceClient (which
posts to the base URL itself) and the openai package (which asks for base64 vectors unless told
otherwise), both against the host running on a real socket.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from models import OnnxCrossEncoder, OnnxEmbedder
from models.host import HostConfig, ThreadedHost, create_host_app

huggingface_hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")

TEXTS = ["How do I grow a ZFS pool?", "Consommation électrique au repos", "WireGuard behind CGNAT"]


@pytest.fixture(autouse=True)
def _hub_client_may_reach_localhost(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The suite sets HF_HUB_OFFLINE, which blocks every URL; these requests go to loopback."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    _http.reset_sessions()
    yield
    monkeypatch.undo()
    _http.reset_sessions()


@pytest.fixture(scope="module")
def embed_only(minilm: OnnxEmbedder) -> Iterator[ThreadedHost]:
    """A host serving only MiniLM, as a TEI container serves one model."""
    with ThreadedHost(create_host_app(minilm)) as host:
        yield host


@pytest.fixture(scope="module")
def rerank_only(tiny_reranker: OnnxCrossEncoder) -> Iterator[ThreadedHost]:
    with ThreadedHost(create_host_app(None, tiny_reranker)) as host:
        yield host


def test_huggingface_inference_client_feature_extraction(
    embed_only: ThreadedHost, served: ThreadedHost, minilm: OnnxEmbedder
) -> None:
    for host in (embed_only, served):  # one model, and both models behind one host
        client = huggingface_hub.InferenceClient(base_url=host.url)
        vector = client.feature_extraction(TEXTS[0])
        np.testing.assert_allclose(np.asarray(vector).reshape(1, -1), minilm.embed(TEXTS[:1]),
                                   atol=1e-6)
        queried = client.feature_extraction(TEXTS[1], prompt_name="query", normalize=True,
                                            truncate=True)
        np.testing.assert_allclose(np.asarray(queried).reshape(1, -1),
                                   minilm.embed(TEXTS[1:2], kind="query"), atol=1e-6)


def test_root_route_reranks_on_a_reranker_host_as_tei_does(
    rerank_only: ThreadedHost, served: ThreadedHost, tiny_reranker: OnnxCrossEncoder
) -> None:
    expected = tiny_reranker.score("zfs pool", ["grow the pool", "cats"])
    for host in (rerank_only, served):
        ranks = httpx.post(f"{host.url}/", json={"query": "zfs pool", "texts": [
            "grow the pool", "cats"], "raw_scores": True}).json()
        scores = {r["index"]: r["score"] for r in ranks}
        np.testing.assert_allclose([scores[0], scores[1]], expected, atol=1e-5)
    # An embedding request to a reranker-only host is refused as TEI does (JSON, 4xx).
    refused = httpx.post(f"{rerank_only.url}/", json={"inputs": "hello"})
    assert refused.status_code == 422 and "error" in refused.json()


def test_openai_client_embeddings_create(served: ThreadedHost, minilm: OnnxEmbedder) -> None:
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
    expected = minilm.embed(TEXTS)
    # The openai package asks for base64 by default and decodes it itself.
    default = client.embeddings.create(model="all-minilm-l6-v2", input=TEXTS)
    assert [d.index for d in default.data] == [0, 1, 2]
    np.testing.assert_allclose([d.embedding for d in default.data], expected, atol=1e-6)
    assert default.model == "all-minilm-l6-v2" and default.object == "list"
    assert default.usage.prompt_tokens == default.usage.total_tokens > len(TEXTS) * 2
    floats = client.embeddings.create(model="all-minilm-l6-v2", input=TEXTS[0],
                                      encoding_format="float")
    np.testing.assert_allclose([floats.data[0].embedding], expected[:1], atol=1e-6)
    assert client.models.list().data[0].id == "all-minilm-l6-v2"
    with pytest.raises(openai.UnprocessableEntityError, match="token ids"):
        client.embeddings.create(model="all-minilm-l6-v2", input=[[101, 2054, 102]])
    with pytest.raises(openai.UnprocessableEntityError, match="cannot shorten"):
        client.embeddings.create(model="all-minilm-l6-v2", input="x", dimensions=64)


def test_v1_embeddings_wire_format_and_json_errors(served: ThreadedHost,
                                                   minilm: OnnxEmbedder) -> None:
    with httpx.Client(base_url=served.url) as http:
        body = http.post("/v1/embeddings", json={"model": "m", "input": ["a b", "c"],
                                                 "encoding_format": "base64"}).json()
        assert set(body) == {"object", "data", "model", "usage"}
        assert set(body["data"][0]) == {"object", "index", "embedding"}
        row = np.frombuffer(base64.b64decode(body["data"][1]["embedding"]), dtype="<f4")
        np.testing.assert_allclose(row, minilm.embed(["c"])[0], atol=1e-6)
        # A long text is cut at the model's window, as OpenAI clients cannot ask for it.
        long = http.post("/v1/embeddings", json={"model": "m", "input": "word " * 2000})
        assert long.status_code == 200
        assert long.json()["usage"]["prompt_tokens"] == minilm.max_length
        for bad, status in (({"model": "m", "input": []}, 422),
                            ({"model": "m", "input": ["ok", "  "]}, 422),
                            ({"input": "no model"}, 422),
                            ({"model": "m", "input": "x", "encoding_format": "int8"}, 422),
                            ({"model": "m", "input": "x", "extra": 1}, 422),
                            ({"model": "m", "input": ["x"] * 513}, 413)):
            answer = http.post("/v1/embeddings", json=bad)
            assert answer.status_code == status, (bad, answer.text)
            error = answer.json()["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["code"] == status
        broken = http.post("/v1/embeddings", content=b"{not json",
                           headers={"Content-Type": "application/json"})
        assert broken.status_code == 400 and broken.json()["error"]["message"]


def test_api_key_guards_the_new_routes(minilm: OnnxEmbedder) -> None:
    with ThreadedHost(create_host_app(minilm, None, HostConfig(api_key="s3cret"))) as host:
        denied = openai.OpenAI(base_url=f"{host.url}/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            denied.embeddings.create(model="m", input="x")
        allowed = openai.OpenAI(base_url=f"{host.url}/v1", api_key="s3cret", max_retries=0)
        assert len(allowed.embeddings.create(model="m", input="x").data[0].embedding) == 384
        client = huggingface_hub.InferenceClient(base_url=host.url, api_key="s3cret")
        assert np.asarray(client.feature_extraction("x")).size == 384

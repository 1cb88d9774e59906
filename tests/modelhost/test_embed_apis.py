"""The remote embedder over TEI, OpenAI's /v1/embeddings and Ollama's /api/embed.

Each API is served by a local server that speaks it for real: TEI and OpenAI's by our model host,
Ollama's by the Ollama-speaking test server (vectors from the same ONNX MiniLM). The sidecar
then embeds the demo forum and answers a search through each of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import Embedder, ModelInputError, OnnxEmbedder
from models.client import RemoteEmbedder
from models.client_apis import OllamaEmbedder, OpenAIEmbedder, remote_embedder
from models.errors import RemoteModelError
from models.host import HostConfig, ThreadedHost, create_host_app
from sidecar.core.types import Mode
from sidecar.errors import ConfigurationError
from sidecar.search.service import SearchOptions
from tests.answer.ollama_server import OllamaServer, running_ollama
from tests.conftest import demo_forum, make_settings
from tests.models.conftest import VARIED_TEXTS

OLLAMA_MODEL = "all-minilm"  # as `ollama pull all-minilm` names it


@pytest.fixture(scope="module")
def ollama(minilm: OnnxEmbedder) -> Iterator[OllamaServer]:
    with running_ollama() as server:
        yield server


@pytest.fixture
def ollama_embeds(ollama: OllamaServer, minilm: OnnxEmbedder) -> OllamaServer:
    ollama.reset()
    ollama.behaviour.embedders = {OLLAMA_MODEL: minilm.embed}
    return ollama


@pytest.fixture(params=["tei", "openai", "ollama"])
def api_url(request: pytest.FixtureRequest, served: ThreadedHost,
            ollama_embeds: OllamaServer) -> tuple[str, str, str]:
    """(api, url, model name) of a server that speaks that API."""
    if request.param == "ollama":
        return "ollama", ollama_embeds.url, OLLAMA_MODEL
    return request.param, served.url, "all-minilm-l6-v2"


def test_each_api_gives_the_in_process_vectors(api_url: tuple[str, str, str],
                                                minilm: OnnxEmbedder) -> None:
    api, url, name = api_url
    client = remote_embedder(api, url, name=name)  # type: ignore[arg-type]
    try:
        assert isinstance(client, Embedder)
        assert client.dimensions == 384 and client.name == name
        texts = list(VARIED_TEXTS)
        np.testing.assert_allclose(client.embed(texts), minilm.embed(texts), atol=1e-5)
        with pytest.raises(ModelInputError):
            client.embed(["fine", "  "])
    finally:
        client.close()


def test_openai_and_ollama_learn_the_window_and_probe_the_size(
    served: ThreadedHost, ollama_embeds: OllamaServer
) -> None:
    openai_client = OpenAIEmbedder(f"{served.url}/v1", name="all-minilm-l6-v2")
    assert (openai_client.max_length, openai_client.dimensions) == (256, 384)  # /v1/models
    ollama_embeds.behaviour.context_length = 8192
    ollama_client = OllamaEmbedder(ollama_embeds.url, name=OLLAMA_MODEL)
    assert (ollama_client.max_length, ollama_client.dimensions) == (8192, 384)
    ollama_client.embed(["x"])
    # Every request asks Ollama for the model's whole window (its default num_ctx is smaller).
    assert all(b.get("options") == {"num_ctx": 8192} and b.get("truncate") is True
               for b in ollama_embeds.embed_requests())
    for client in (openai_client, ollama_client):
        client.close()


def test_estimated_tokens_cut_long_posts() -> None:
    client = OllamaEmbedder("http://127.0.0.1:9", name="m")
    client._info = {"max_input_length": 12, "model_id": "m"}  # what _describe learnt
    assert client.count_tokens("Hello, world! 東京です") == 8  # 2 words, 2 marks, 4 CJK
    text = "one two, three four five six seven eight nine ten eleven twelve"
    assert client.truncate_text(text) == "one two, three four five six seven eight nine"
    assert client.truncate_text(text, 2) == "one two"
    assert client.truncate_text("short text") == "short text"
    assert client.truncate_text(text, 0) == ""
    client.close()


def test_batches_timeouts_and_errors_are_the_remote_embedders(
    ollama_embeds: OllamaServer, minilm: OnnxEmbedder
) -> None:
    client = OllamaEmbedder(ollama_embeds.url, name=OLLAMA_MODEL, timeout=1.0)
    texts = [f"sentence number {i}" for i in range(70)]
    np.testing.assert_allclose(client.embed(texts), minilm.embed(texts), atol=1e-5)
    sizes = [len(b["input"]) for b in ollama_embeds.embed_requests()[1:]]  # after the probe
    assert sizes == [32, 32, 6]  # the same client batch as against TEI
    ollama_embeds.behaviour.delay_s = 1.5
    with pytest.raises(RemoteModelError, match="timed out after 1s") as slow:
        client.embed(["x"])
    assert slow.value.transient
    ollama_embeds.behaviour.delay_s = 0
    ollama_embeds.behaviour.status = 500
    with pytest.raises(RemoteModelError) as failing:
        client.embed(["x"])
    assert failing.value.status == 500 and failing.value.transient
    ollama_embeds.behaviour.status = None
    client.close()
    missing = OllamaEmbedder(ollama_embeds.url, name="bge-m3")
    with pytest.raises(RemoteModelError, match="not found") as absent:
        missing.dimensions  # noqa: B018
    assert absent.value.status == 404 and absent.value.terminal
    missing.close()
    chat = OllamaEmbedder(ollama_embeds.url, name="qwen3:30b-a3b")  # a chat model
    with pytest.raises(RemoteModelError, match="does not support embeddings"):
        chat.dimensions  # noqa: B018
    chat.close()


def test_openai_api_errors_are_classified(minilm: OnnxEmbedder) -> None:
    with ThreadedHost(create_host_app(minilm, None, HostConfig(api_key="s3cret"))) as host:
        wrong = OpenAIEmbedder(host.url, name="m", api_key="nope")
        with pytest.raises(RemoteModelError) as denied:
            wrong.dimensions  # noqa: B018
        assert denied.value.status == 401 and denied.value.terminal
        wrong.close()
        right = OpenAIEmbedder(host.url, name="m", api_key="s3cret")
        assert right.dimensions == 384
        assert right.max_length == 512  # /v1/models names another model: the default window
        right.close()


def test_unknown_api_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embedding API"):
        remote_embedder("grpc", "http://127.0.0.1:9")  # type: ignore[arg-type]


def test_an_unreachable_ollama_stops_start_up_clearly(
    tmp_path: Path, db_url: str, redis_url: str
) -> None:
    from sidecar.runtime.resources import start_resources

    settings = make_settings(tmp_path, db_url, redis_url, embed_url="http://127.0.0.1:9",
                             embed_api="ollama", embed_model="bge-m3")
    with pytest.raises(ConfigurationError, match=r"\(ollama API\).*cannot reach"):
        start_resources(settings)


@pytest.mark.parametrize("api", ["openai", "ollama"])
def test_the_sidecar_searches_through_each_api(
    api: str, served: ThreadedHost, ollama_embeds: OllamaServer, pg_admin_url: str,
    redis_url: str, tmp_path: Path, redis_client: Any,
) -> None:
    # TEI's API: the whole demo suite runs through it (tests/conftest.py, demo_state "host").
    url, name = ((ollama_embeds.url, OLLAMA_MODEL) if api == "ollama"
                 else (served.url, "all-minilm-l6-v2"))
    with demo_forum(pg_admin_url, redis_url, tmp_path, None, embed_url=url, embed_api=api,
                    embed_model=name) as res:
        assert isinstance(res.embedder, RemoteEmbedder)
        assert (res.model.name, res.model.dimensions) == (name, 384)
        results, trace = res.search.search("How do I grow a ZFS RAIDZ pool?", 3,
                                           SearchOptions(mode=Mode.SEMANTIC))
        assert results and results[0].topic.topic_id == 20, [r.topic.topic_id for r in results]
        assert trace.as_list()[0]["step"] == "embed"

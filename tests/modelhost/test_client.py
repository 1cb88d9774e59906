"""RemoteEmbedder / RemoteReranker: the same answers as in-process, and classified errors."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from models import Embedder, ModelInputError, OnnxCrossEncoder, OnnxEmbedder, Reranker
from models.client import RemoteEmbedder, RemoteReranker, _char_spans
from models.errors import RemoteInputError, RemoteModelError
from models.host import HostConfig, ThreadedHost, create_host_app
from tests.models.conftest import VARIED_TEXTS


@pytest.fixture(scope="module")
def remote(served: ThreadedHost) -> Iterator[RemoteEmbedder]:
    client = RemoteEmbedder(served.url, name="all-minilm-l6-v2")
    yield client
    client.close()


def test_remote_embedder_is_an_embedder_with_the_hosts_facts(remote: RemoteEmbedder) -> None:
    assert isinstance(remote, Embedder)
    assert (remote.name, remote.dimensions, remote.max_length) == ("all-minilm-l6-v2", 384, 256)
    assert remote.provider == "cpu"


def test_vectors_equal_the_in_process_ones(remote: RemoteEmbedder, minilm: OnnxEmbedder) -> None:
    texts = list(VARIED_TEXTS)
    np.testing.assert_allclose(remote.embed(texts), minilm.embed(texts), atol=1e-6)
    np.testing.assert_allclose(remote.embed(texts[:3], kind="query"),
                               minilm.embed(texts[:3], kind="query"), atol=1e-6)  # fmt: skip
    with pytest.raises(ModelInputError):
        remote.embed([])
    with pytest.raises(ModelInputError):
        remote.embed(["fine", "  "])
    with pytest.raises(ModelInputError):
        remote.embed(["a"], kind="summary")  # type: ignore[arg-type]


@pytest.mark.parametrize("max_tokens", [None, 1, 7, 50, 254])
def test_truncation_and_counts_are_exactly_the_models(
    remote: RemoteEmbedder, minilm: OnnxEmbedder, max_tokens: int | None
) -> None:
    texts = [*VARIED_TEXTS, "Héllo wörld, ça va? " * 60, "東京は日本の首都です。" * 40,
             "x" * 3000, "a  b\n\n c " * 150, "", "   \n ",
             " " * 3000 + "late start " * 300]  # fmt: skip
    for text in texts:
        assert remote.truncate_text(text, max_tokens) == minilm.truncate_text(text, max_tokens)
        assert remote.count_tokens(text) == minilm.count_tokens(text)
    assert remote.max_text_tokens("passage") == minilm.max_text_tokens("passage") == 254


def test_huge_texts_are_cut_through_small_tokenize_requests(minilm: OnnxEmbedder) -> None:
    # The host refuses texts over 2,000 characters; the client still truncates a 60,000
    # character post exactly as the in-process tokenizer does, and counts its tokens.
    config = HostConfig(max_input_chars=2000)
    post = "Backups need a restore test. " * 2000
    with ThreadedHost(create_host_app(minilm, None, config)) as host:
        client = RemoteEmbedder(host.url)
        assert client.truncate_text(post) == minilm.truncate_text(post)
        assert client.count_tokens(post) == minilm.count_tokens(post)
        client.close()


def test_requests_are_cut_to_the_hosts_client_batch(minilm: OnnxEmbedder) -> None:
    texts = [f"sentence number {i}" for i in range(8)]
    with ThreadedHost(create_host_app(minilm, None, HostConfig(max_inputs=3))) as host:
        client = RemoteEmbedder(host.url)
        np.testing.assert_allclose(client.embed(texts), minilm.embed(texts), atol=1e-6)
        metrics = client._http.get("/metrics").text
        client.close()
    assert 'model_host_requests_total{route="/embed",status="200"} 3.0' in metrics


def test_remote_reranker_returns_logits_in_passage_order(
    served: ThreadedHost, tiny_reranker: OnnxCrossEncoder
) -> None:
    reranker = RemoteReranker(served.url)
    assert isinstance(reranker, Reranker)
    assert reranker.name == "tiny-cross-encoder-seed3" and reranker.provider == "cpu"
    passages = list(VARIED_TEXTS)
    np.testing.assert_allclose(reranker.score("how do I reset my password", passages),
                               tiny_reranker.score("how do I reset my password", passages),
                               atol=1e-5)  # fmt: skip
    with pytest.raises(ModelInputError):
        reranker.score(" ", ["a"])
    reranker.close()


def test_a_reranker_client_refuses_an_embedding_only_host(minilm: OnnxEmbedder) -> None:
    with ThreadedHost(create_host_app(minilm)) as host:
        reranker = RemoteReranker(host.url, name="mmarco")
        assert reranker.name == "mmarco" and reranker.provider == "remote"
        with pytest.raises(RemoteModelError, match="not an reranker model"):
            reranker.score("q", ["a"])
        reranker.close()


def test_api_key_is_sent_as_a_bearer_token(minilm: OnnxEmbedder) -> None:
    with ThreadedHost(create_host_app(minilm, None, HostConfig(api_key="k3y"))) as host:
        good = RemoteEmbedder(host.url, api_key="k3y")
        assert good.embed(["hello"]).shape == (1, 384)
        bad = RemoteEmbedder(host.url, api_key="nope")
        with pytest.raises(RemoteModelError) as caught:
            bad.embed(["hello"])
        assert caught.value.status == 401 and caught.value.terminal
        assert not caught.value.transient
        good.close()
        bad.close()


# --- a scripted HTTP server: TEI's shapes and its failures -------------------------------


class Scripted(BaseHTTPRequestHandler):
    """Answers each path from ``server.script``: (status, body or callable, delay)."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length)) if length else None
        self.server.seen.append((self.path, request, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        status, body, delay = self.server.script[self.path]  # type: ignore[attr-defined]
        time.sleep(delay)
        payload = body(request) if callable(body) else body
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.daemon_threads = True
    server.script = {}  # type: ignore[attr-defined]
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: Any) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _tei_tokenize(req: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Whitespace tokens with UTF-8 *byte* offsets, as TEI versions before 1.6 returned."""
    text: str = req["inputs"]
    data, tokens = text.encode(), []
    for match in re.finditer(rb"\S+", data):
        tokens.append({"id": 5, "text": match.group().decode(), "special": False,
                       "start": match.start(), "stop": match.end()})  # fmt: skip
    special = [{"id": 0, "text": "<s>", "special": True, "start": None, "stop": None}]
    return [special + tokens + special if req["add_special_tokens"] else tokens]


TEI_INFO = {"model_id": "BAAI/bge-m3", "model_type": {"embedding": {"pooling": "cls"}},
            "max_input_length": 8192, "max_client_batch_size": 2}  # fmt: skip


def test_works_against_teis_own_shapes(scripted: Any) -> None:
    # A real TEI: no "dimensions", "provider", "prompts" or "models" in /info.
    scripted.script.update({
        "/info": (200, TEI_INFO, 0),
        "/embed": (200, lambda req: [[float(len(t)), 1.0, 0.0, 0.5] for t in req["inputs"]], 0),
        "/tokenize": (200, _tei_tokenize, 0),
    })  # fmt: skip
    client = RemoteEmbedder(_url(scripted), name="bge-m3", api_key="tei-key")
    assert client.provider == "remote" and client.max_length == 8192
    assert client.dimensions == 4  # measured with one probe, since TEI does not say
    vectors = client.embed(["a", "bb", "ccc", "dddd", "eeeee"])
    assert vectors[:, 0].tolist() == [1, 2, 3, 4, 5]
    embeds = [req for path, req, _ in scripted.seen if path == "/embed"]
    assert [len(r["inputs"]) for r in embeds] == [1, 2, 2, 1]  # probe, then chunks of 2
    assert all(r["truncate"] is True and "prompt_name" not in r for r in embeds)
    assert {auth for _, _, auth in scripted.seen} == {"Bearer tei-key"}
    assert client.max_text_tokens() == 8190  # 8192 minus <s> and </s>
    assert client.count_tokens("naïve café, déjà vu") == 4
    assert client.truncate_text("naïve café, déjà vu", 2) == "naïve café,"  # bytes understood
    client.close()


def test_offsets_in_characters_or_bytes_give_the_same_spans() -> None:
    text = "Ça coûte 5 €"
    chars = [(0, 2, "Ça"), (3, 8, "coûte"), (9, 10, "5"), (11, 12, "€")]
    as_bytes = [(0, 3, "Ça"), (4, 10, "coûte"), (11, 12, "5"), (13, 16, "€")]
    assert _char_spans(text, chars) == _char_spans(text, as_bytes) == [
        (0, 2), (3, 8), (9, 10), (11, 12)]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "error_type", "terminal", "transient", "input_error"),
    [
        (401, "unauthorized", True, False, False),
        (403, None, True, False, False),
        (404, None, True, False, False),
        (408, None, False, True, False),
        (413, "validation", False, False, True),
        (422, "tokenizer", False, False, True),
        (424, "backend", False, True, False),
        (429, "overloaded", False, True, False),
        (500, None, False, True, False),
        (503, "unhealthy", False, True, False),
    ],
)
def test_http_failures_are_classified(
    scripted: Any, status: int, error_type: str | None, terminal: bool, transient: bool,
    input_error: bool,
) -> None:
    body = {"error": f"scripted failure {status}", "error_type": error_type}
    scripted.script.update({"/info": (200, TEI_INFO, 0), "/embed": (status, body, 0)})
    client = RemoteEmbedder(_url(scripted), name="bge-m3")
    with pytest.raises(RemoteModelError) as caught:
        client.embed(["hello"])
    error = caught.value
    assert (error.status, error.error_type) == (status, error_type)
    assert (error.terminal, error.transient) == (terminal, transient)
    assert isinstance(error, ModelInputError) is input_error
    assert isinstance(error, RemoteInputError) is input_error
    assert _url(scripted) in str(error) and f"scripted failure {status}" in str(error)
    client.close()


def test_no_answer_is_a_transient_error_with_no_status(scripted: Any) -> None:
    scripted.script.update({"/info": (200, TEI_INFO, 0), "/embed": (200, [[1.0]], 2.0)})
    slow = RemoteEmbedder(_url(scripted), timeout=0.3)
    with pytest.raises(RemoteModelError, match=r"timed out after 0\.3s") as caught:
        slow.embed(["hello"])
    assert caught.value.status is None and caught.value.transient
    slow.close()
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = RemoteEmbedder(f"http://127.0.0.1:{port}", name="x")
    with pytest.raises(RemoteModelError, match="cannot reach GET /info") as refused:
        down.dimensions  # noqa: B018
    assert refused.value.status is None and refused.value.transient
    assert down.provider == "remote"  # health pages never raise
    down.close()


def test_garbage_answers_are_clear_errors(scripted: Any) -> None:
    scripted.script.update({"/info": (200, TEI_INFO, 0), "/embed": (200, b"<html>", 0),
                            "/rerank": (200, [{"index": 7, "score": 1.0}], 0)})  # fmt: skip
    client = RemoteEmbedder(_url(scripted))
    with pytest.raises(RemoteModelError, match="not JSON"):
        client.embed(["a"])
    client.close()
    info = {**TEI_INFO, "model_type": {"reranker": {"id2label": {"0": "LABEL_0"}}}}
    scripted.script["/info"] = (200, info, 0)
    reranker = RemoteReranker(_url(scripted))
    with pytest.raises(RemoteModelError, match="unexpected body"):
        reranker.score("q", ["a", "b"])
    reranker.close()
    with pytest.raises(ValueError, match="http"):
        RemoteEmbedder("localhost:8341")

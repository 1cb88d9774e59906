"""Fixtures of the retrieval pipeline tests: our own demo state (we write retrievals), the tiny
cross-encoder, and a local server that speaks Ollama's API."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from models.protocols import Reranker
from sidecar.search.profile import load_served
from sidecar.search.service import SearchService
from tests.answer.ollama_server import OllamaServer
from tests.conftest import demo_forum


@pytest.fixture(scope="session")
def answer_state(
    tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str, minilm: Any
) -> Iterator[Any]:
    """The demo forum imported and embedded in a database of our own (``demo_state`` is
    read-only; retrievals are rows we write)."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("answer"), minilm,
                    prefix="t_answer") as res:
        yield res


@pytest.fixture(scope="session")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory) -> Reranker:
    """The tiny random cross-encoder (real ONNX, meaningless but deterministic scores)."""
    from models import load_reranker, make_tiny_cross_encoder

    out = tmp_path_factory.mktemp("tiny-ce")
    make_tiny_cross_encoder(out, seed=0)
    reranker = load_reranker(out)
    reranker.warmup()
    return reranker


@pytest.fixture(scope="session")
def _ollama_session() -> Iterator[OllamaServer]:
    server = OllamaServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_ollama(_ollama_session: OllamaServer) -> OllamaServer:
    """The Ollama-speaking server, reset to its defaults and with no recorded request."""
    _ollama_session.reset()
    return _ollama_session


def variant(base: Any, *, reranker: Reranker | None = None, reranker_error: str | None = None,
            **overrides: Any) -> Any:
    """Resources over the same database with other settings or cross-encoder.

    Each variant gets its own Redis namespace, so cache and budget never leak between tests.
    """
    values = {"queue_prefix": f"t{uuid.uuid4().hex[:10]}", **overrides}
    settings = base.settings.model_copy(update=values)
    # As the resources do at start-up: the served configuration from these settings (and a
    # profile, if the state directory holds one).
    served = load_served(settings, base.model.name)
    search = SearchService(base.db, base.embedder, base.model, settings,
                           iterative_scan=base.search.iterative_scan, served=served.config,
                           served_details=served.details_config)
    loaded = dataclasses.replace(base.loaded_models(), search=search, profile=served,
                                 reranker=reranker, reranker_error=reranker_error)
    return dataclasses.replace(base, settings=settings, loaded=loaded)


@pytest.fixture
def make_client(answer_state: Any) -> Callable[..., Any]:
    """``make_client(reranker=..., **settings)``: a test client of an app over our demo state."""
    from sidecar.api.app import create_app

    def build(**kwargs: Any) -> Any:
        res = variant(answer_state, **kwargs)
        app = create_app(res.settings, res)
        client = app.test_client()
        client.resources = res
        return client

    return build


@pytest.fixture
def free_port_url() -> str:
    """An address where nothing listens (Ollama "down")."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


DATA = Path(__file__).resolve().parents[1] / "data"

"""Fixtures of the model host tests: MiniLM and a tiny cross-encoder served over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import OnnxCrossEncoder, OnnxEmbedder, load_reranker, make_tiny_cross_encoder
from models.host import HostConfig, ThreadedHost, create_host_app


@pytest.fixture(scope="session")
def tiny_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our own tiny random cross-encoder (fixed seed, MiniLM tokenizer): no download."""
    out = tmp_path_factory.mktemp("tiny-ce")
    make_tiny_cross_encoder(out, seed=3)
    return out


@pytest.fixture(scope="session")
def tiny_reranker(tiny_reranker_dir: Path) -> OnnxCrossEncoder:
    """The tiny cross-encoder, loaded once."""
    return load_reranker(tiny_reranker_dir)


@pytest.fixture(scope="module")
def served(minilm: OnnxEmbedder, tiny_reranker: OnnxCrossEncoder) -> Iterator[ThreadedHost]:
    """One host serving MiniLM and the tiny cross-encoder on a free port."""
    with ThreadedHost(create_host_app(minilm, tiny_reranker)) as host:
        yield host


def make_app(embedder: Any = None, reranker: Any = None, **limits: Any) -> Any:
    """A host app with custom limits, for Flask's test client."""
    return create_host_app(embedder, reranker, HostConfig(**limits))


class Recording:
    """Wraps a model: counts model calls and their sizes; the first call can wait on a gate.

    Holding the first call lets a test queue many concurrent requests behind it, so batching is
    checked by counting calls, never by timing.
    """

    def __init__(self, inner: Any, gate: threading.Event | None = None) -> None:
        self.inner = inner
        self.gate = gate
        self.sizes: list[int] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _record(self, size: int) -> None:
        with self._lock:
            self.sizes.append(size)
            first = len(self.sizes) == 1
        if first and self.gate is not None:
            assert self.gate.wait(60), "the test never opened the gate"

    def embed(self, texts: Sequence[str], kind: str = "passage",
              normalize: bool | None = None) -> np.ndarray:
        self._record(len(texts))
        return self.inner.embed(texts, kind=kind, normalize=normalize)  # type: ignore[no-any-return]

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self._record(len(pairs))
        return self.inner.score_pairs(pairs)  # type: ignore[no-any-return]

"""A query-vector cache around the product's embedder, for the evaluation's repeated queries."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from models.protocols import Embedder


class CachedQueryEmbedder:
    """The product's embedder, with query vectors kept: every configuration embeds the same
    queries, and the evaluation measures ranking, not the model's speed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, npt.NDArray[np.float32]] = {}
        self.embed_ms: list[float] = []

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.inner.name

    @property
    def dimensions(self) -> int:
        """The wrapped model's dimensions."""
        return self.inner.dimensions

    @property
    def max_length(self) -> int:
        """The wrapped model's token budget."""
        return self.inner.max_length

    @property
    def provider(self) -> str:
        """Where the wrapped model runs."""
        return self.inner.provider

    def embed(self, texts: Sequence[str],
              kind: Literal["passage", "query"] = "passage") -> npt.NDArray[np.float32]:
        """Query vectors come from the cache once computed; passages always go to the model."""
        if kind != "query":
            return self.inner.embed(texts, kind=kind)
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            started = time.perf_counter()
            vectors = self.inner.embed(missing, kind="query")
            self.embed_ms.append((time.perf_counter() - started) * 1000 / len(missing))
            self.cache.update(zip(missing, vectors, strict=True))
        return np.stack([self.cache[t] for t in texts])

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """Delegated."""
        return self.inner.truncate_text(text, max_tokens)

    def count_tokens(self, text: str) -> int:
        """Delegated."""
        return self.inner.count_tokens(text)

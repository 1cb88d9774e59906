"""Interfaces the sidecar codes against, so a remote (HTTP) model can stand in later."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-size float32 vectors."""

    @property
    def name(self) -> str:
        """Model name (stored next to the vectors)."""
        ...

    @property
    def dimensions(self) -> int:
        """Vector size."""
        ...

    @property
    def max_length(self) -> int:
        """Maximum tokens per input, special tokens included."""
        ...

    @property
    def provider(self) -> str:
        """Where it runs ("cpu", "cuda", "openvino", or e.g. "remote")."""
        ...

    def embed(
        self, texts: Sequence[str], kind: Literal["passage", "query"] = "passage"
    ) -> npt.NDArray[np.float32]:
        """float32 array ``(len(texts), dimensions)`` in input order."""
        ...

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """Longest prefix of ``text`` that the model sees whole (at most ``max_tokens``)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs; higher means more relevant."""

    @property
    def name(self) -> str:
        """Model name."""
        ...

    @property
    def provider(self) -> str:
        """Where it runs."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """One raw score per passage, in passage order."""
        ...

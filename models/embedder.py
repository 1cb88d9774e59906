"""Sentence embeddings with ONNX Runtime, plus a deterministic stand-in for tests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from models.base import OnnxModel, pick_output, validate_texts
from models.batching import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from models.errors import ModelInputError, ModelLoadError
from models.tokenization import PaddedBatch

Kind = Literal["passage", "query"]
FloatArray = npt.NDArray[np.float32]


def _check_kind(kind: str) -> None:
    if kind not in ("passage", "query"):
        raise ModelInputError(f"kind must be 'passage' or 'query', got {kind!r}")


class OnnxEmbedder(OnnxModel):
    """Embedding model described by a prepared model directory (see ``sidecar models prepare``).

    ``embed`` = prefix -> :meth:`tokenize` -> length-aware batches -> :meth:`run` -> :meth:`pool`
    -> :meth:`normalize`, with results put back in input order.
    """

    def __init__(
        self,
        model_dir: str | Path,
        provider: str = "cpu",
        threads: int = 0,
        inter_op_threads: int = 0,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        verify: bool = True,
    ) -> None:
        super().__init__(
            model_dir, "embed", provider, threads, inter_op_threads, max_batch_tokens,
            max_batch_size, verify,
        )  # fmt: skip
        # A graph may already pool (e.g. a "sentence_embedding" output): then we skip pooling.
        outputs = {o.name: o for o in self.session.get_outputs()}
        self._output = pick_output(list(outputs), "embed")
        rank = len(outputs[self._output].shape)
        if rank not in (2, 3):
            raise ModelLoadError(self.onnx_path, f"output {self._output!r} has rank {rank}")
        self._prefix_tokens = {
            "query": self.tokenizer.count_tokens(self.manifest.query_prefix),
            "passage": self.tokenizer.count_tokens(self.manifest.passage_prefix),
        }

    @property
    def dimensions(self) -> int:
        """Size of the embedding vectors."""
        return self.manifest.dimensions

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids (special tokens included, truncated to ``max_length``) of each text."""
        return self.tokenizer.encode_batch(texts)

    def run(self, batch: Sequence[Sequence[int]]) -> tuple[FloatArray, PaddedBatch]:
        """Pad ``batch`` and run the graph; returns the raw output and the padded inputs."""
        padded = self.pad(batch)
        output = self.session.run([self._output], self.feeds(padded))[0]
        return np.asarray(output, dtype=np.float32), padded

    def pool(self, hidden: FloatArray, attention_mask: npt.NDArray[np.int64]) -> FloatArray:
        """Pool token states ``[B, S, H]`` into sentence vectors ``[B, H]``.

        ``mean`` averages the non-padded tokens only; ``cls`` takes the first token. A graph that
        already pooled (rank-2 output) is passed through.
        """
        if hidden.ndim == 2:
            return hidden
        if self.manifest.pooling == "cls":
            return np.ascontiguousarray(hidden[:, 0, :])
        mask = attention_mask.astype(np.float32)[:, :, None]
        summed = (hidden * mask).sum(axis=1)
        # Clamp like sentence-transformers so an all-padding row cannot divide by zero.
        counts = np.clip(mask.sum(axis=1), 1e-9, None)
        return (summed / counts).astype(np.float32)

    @staticmethod
    def normalize(vectors: FloatArray) -> FloatArray:
        """L2-normalise rows (zero rows stay zero)."""
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed(
        self, texts: Sequence[str], kind: Kind = "passage", normalize: bool | None = None
    ) -> FloatArray:
        """Embed ``texts``; returns float32 ``(len(texts), dimensions)`` in input order.

        ``kind`` selects the manifest's query or passage prefix; ``normalize`` overrides the
        manifest's normalisation (the model host asks for raw vectors and normalises per
        request). Raises :class:`ModelInputError` for an empty list or an empty / non-string
        item.
        """
        _check_kind(kind)
        items = validate_texts(texts)
        prefix = self.manifest.query_prefix if kind == "query" else self.manifest.passage_prefix
        ids = self.tokenize([prefix + t for t in items] if prefix else items)
        result = np.empty((len(items), self.dimensions), dtype=np.float32)
        for indices in self.plan([len(x) for x in ids]):
            hidden, padded = self.run([ids[i] for i in indices])
            vectors = self.pool(hidden, padded.attention_mask)
            if vectors.shape[1] != self.dimensions:
                raise ModelLoadError(
                    self.onnx_path,
                    f"graph produced {vectors.shape[1]}-d vectors, manifest says {self.dimensions}",
                )
            result[indices] = vectors
        if normalize is None:
            normalize = self.manifest.normalize
        return self.normalize(result) if normalize else result

    def warmup(self) -> None:
        """Run two small batches so the first real request does not pay for allocations."""
        self.embed(["warm-up", "a slightly longer warm-up sentence for the embedding model"])
        self.embed(["warm-up query"], kind="query")

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (no special tokens, no prefix, no truncation)."""
        return self.tokenizer.count_tokens(text)

    def max_text_tokens(self, kind: Kind = "passage") -> int:
        """Tokens of text that fit after the special tokens and the ``kind`` prefix."""
        _check_kind(kind)
        return self.tokenizer.max_content_tokens - self._prefix_tokens[kind]

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """Longest prefix of ``text`` that the model embeds without truncating it further.

        ``max_tokens`` defaults to (and is capped at) :meth:`max_text_tokens` for passages, so the
        returned string is exactly the passage text the model sees — hash it, not the original.
        """
        limit = self.max_text_tokens("passage")
        return self.tokenizer.truncate_text(
            text, limit if max_tokens is None else min(max_tokens, limit)
        )


class DummyEmbedder:
    """Deterministic hash-based unit vectors, with the :class:`OnnxEmbedder` interface.

    For HTTP and pipeline tests that need embeddings but not their quality: the same text always
    yields the same vector (in any process), different texts yield unrelated vectors, and
    ``kind`` is ignored so a query equal to a passage matches it exactly. Tokens are
    whitespace-separated words.
    """

    def __init__(
        self, dimensions: int = 32, max_length: int = 256, name: str | None = None
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        self._dimensions = dimensions
        self._max_length = max_length
        self._name = name or f"dummy-{dimensions}"

    @property
    def name(self) -> str:
        """Model name."""
        return self._name

    @property
    def dimensions(self) -> int:
        """Vector size."""
        return self._dimensions

    @property
    def max_length(self) -> int:
        """Maximum tokens (words) per text."""
        return self._max_length

    @property
    def provider(self) -> str:
        """Always ``"cpu"``."""
        return "cpu"

    def embed(
        self, texts: Sequence[str], kind: Kind = "passage", normalize: bool | None = None
    ) -> FloatArray:
        """One unit vector per text, derived from the sha256 of the (truncated) text.

        ``normalize`` is accepted for interface parity; the vectors are unit vectors anyway.
        """
        _check_kind(kind)
        items = validate_texts(texts)
        out = np.empty((len(items), self._dimensions), dtype=np.float32)
        for row, text in enumerate(items):
            seed = int.from_bytes(hashlib.sha256(self.truncate_text(text).encode()).digest()[:8])
            vector = np.random.default_rng(seed).standard_normal(self._dimensions)
            out[row] = vector / np.linalg.norm(vector)
        return out

    def warmup(self) -> None:
        """Nothing to warm up."""

    def count_tokens(self, text: str) -> int:
        """Number of whitespace-separated words."""
        return len(text.split())

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """Prefix of ``text`` holding at most ``max_tokens`` words (default ``max_length``)."""
        limit = self._max_length if max_tokens is None else min(max_tokens, self._max_length)
        words = text.split()
        if len(words) <= limit:
            return text
        if limit <= 0:
            return ""
        # Cut right after the limit-th word so the result is an exact prefix of the input.
        position = 0
        for word in words[:limit]:
            position = text.index(word, position) + len(word)
        return text[:position]

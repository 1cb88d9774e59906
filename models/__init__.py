"""Embedding and reranking models on ONNX Runtime, with a torch-free exporter.

Typical use::

    from models import prepare_model, load_embedder, load_reranker

    prepare_model("all-MiniLM-L6-v2", "embed", Path("var/models/minilm"))
    embedder = load_embedder("var/models/minilm")
    vectors = embedder.embed(["How do I reset my password?"], kind="query")
"""

from __future__ import annotations

from pathlib import Path

from models.batching import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from models.crossencoder import OnnxCrossEncoder
from models.embedder import DummyEmbedder, OnnxEmbedder
from models.errors import ModelError, ModelInputError, ModelLoadError
from models.manifest import ModelManifest, read_manifest, verify_checksum, write_manifest
from models.prepare import prepare_model
from models.protocols import Embedder, Reranker
from models.tiny import make_tiny_cross_encoder, make_tiny_embedder

__all__ = [
    "DummyEmbedder",
    "Embedder",
    "ModelError",
    "ModelInputError",
    "ModelLoadError",
    "ModelManifest",
    "OnnxCrossEncoder",
    "OnnxEmbedder",
    "Reranker",
    "load_embedder",
    "load_reranker",
    "make_tiny_cross_encoder",
    "make_tiny_embedder",
    "prepare_model",
    "read_manifest",
    "verify_checksum",
    "write_manifest",
]


def load_embedder(
    path: str | Path,
    provider: str = "cpu",
    threads: int = 0,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> OnnxEmbedder:
    """Open a prepared embedding model directory (raises :class:`ModelLoadError` on failure)."""
    return OnnxEmbedder(
        path,
        provider=provider,
        threads=threads,
        max_batch_tokens=max_batch_tokens,
        max_batch_size=max_batch_size,
    )


def load_reranker(
    path: str | Path,
    provider: str = "cpu",
    threads: int = 0,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> OnnxCrossEncoder:
    """Open a prepared cross-encoder directory (raises :class:`ModelLoadError` on failure)."""
    return OnnxCrossEncoder(
        path,
        provider=provider,
        threads=threads,
        max_batch_tokens=max_batch_tokens,
        max_batch_size=max_batch_size,
    )

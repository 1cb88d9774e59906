"""Embedding and reranking models on ONNX Runtime, with a torch-free exporter.

Typical use::

    from models import prepare_model, load_embedder, load_reranker

    prepare_model("all-MiniLM-L6-v2", "embed", Path("var/models/minilm"))
    embedder = load_embedder("var/models/minilm")
    vectors = embedder.embed(["How do I reset my password?"], kind="query")
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models.crossencoder import OnnxCrossEncoder  # heavy dependency: as load_embedder
    from models.embedder import DummyEmbedder, OnnxEmbedder
    from models.errors import ModelError, ModelInputError, ModelLoadError
    from models.manifest import ModelManifest, read_manifest, verify_checksum, write_manifest
    from models.prepare import prepare_model
    from models.protocols import Embedder, Reranker
    from models.tiny import make_tiny_cross_encoder, make_tiny_embedder

# Names are imported on first use (PEP 562), so that `import models.manifest` stays light: a
# gunicorn master checks model directories without loading ONNX Runtime or numpy, whose
# threads must not cross the fork into the workers.
_EXPORTS: dict[str, str] = {
    "DummyEmbedder": "models.embedder",
    "Embedder": "models.protocols",
    "ModelError": "models.errors",
    "ModelInputError": "models.errors",
    "ModelLoadError": "models.errors",
    "ModelManifest": "models.manifest",
    "OnnxCrossEncoder": "models.crossencoder",
    "OnnxEmbedder": "models.embedder",
    "Reranker": "models.protocols",
    "make_tiny_cross_encoder": "models.tiny",
    "make_tiny_embedder": "models.tiny",
    "prepare_model": "models.prepare",
    "read_manifest": "models.manifest",
    "verify_checksum": "models.manifest",
    "write_manifest": "models.manifest",
}

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

# Mirrors models.batching (kept literal here so that this module imports nothing heavy).
DEFAULT_MAX_BATCH_TOKENS = 16384
DEFAULT_MAX_BATCH_SIZE = 32


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def load_embedder(
    path: str | Path,
    provider: str = "cpu",
    threads: int = 0,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> OnnxEmbedder:
    """Open a prepared embedding model directory (raises :class:`ModelLoadError` on failure)."""
    from models.embedder import OnnxEmbedder  # heavy dependency (numpy, ONNX Runtime): fork safety

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
    from models.crossencoder import OnnxCrossEncoder  # heavy dependency: as load_embedder

    return OnnxCrossEncoder(
        path,
        provider=provider,
        threads=threads,
        max_batch_tokens=max_batch_tokens,
        max_batch_size=max_batch_size,
    )

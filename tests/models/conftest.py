"""Shared fixtures: one native export of all-MiniLM-L6-v2 and tiny random models per session."""

from __future__ import annotations

import os
from pathlib import Path

# Tests must never reach the network; huggingface_hub reads these at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

from models import (
    OnnxEmbedder,
    make_tiny_cross_encoder,
    make_tiny_embedder,
    prepare_model,
)

VARIED_TEXTS = [
    "How do I reset my password?",
    "I forgot my login credentials and cannot sign in.",
    "The quarterly earnings report beat analyst expectations.",
    "Bake the bread at 220 degrees for forty minutes.",
    "Python's asyncio event loop runs coroutines cooperatively.",
    "ERROR: connection refused (errno 111) while contacting postgres on port 5432",
    "Le chat dort sur le canapé depuis ce matin.",
    "Der Zug nach Berlin hat zwanzig Minuten Verspätung.",
    "¿Dónde está la biblioteca más cercana?",
    "東京は日本の首都です。",
    "🚀 Launch day! Thanks to everyone who contributed 🎉",
    "ok",
    "SELECT id, title FROM topics WHERE category_id = 7 ORDER BY created_at DESC LIMIT 20;",
    "The mitochondria is the powerhouse of the cell, producing ATP through respiration.",
    "Rain is expected tomorrow afternoon with strong winds along the coast.",
    "def add(a, b):\n    return a + b",
    "Our forum moderators review flagged posts within 24 hours.",
    "She sells sea shells by the sea shore, " * 12,
    "A long discussion thread about database migrations, indexes, vacuum, replication "
    "lag, connection pooling and the trade-offs between them in production systems. " * 6,
    "Is it possible to upgrade the plugin without downtime?",
]


@pytest.fixture(scope="session")
def minilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 exported once by the native (torch-free) exporter."""
    out = tmp_path_factory.mktemp("minilm")
    prepare_model("all-MiniLM-L6-v2", "embed", out)
    return out


@pytest.fixture(scope="session")
def minilm(minilm_dir: Path) -> OnnxEmbedder:
    """The exported MiniLM, loaded once."""
    return OnnxEmbedder(minilm_dir)


@pytest.fixture(scope="session")
def tiny_embedder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT embedder (32 dims)."""
    out = tmp_path_factory.mktemp("tiny-embedder")
    make_tiny_embedder(out, seed=0)
    return out


@pytest.fixture(scope="session")
def tiny_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT cross-encoder (1 logit)."""
    out = tmp_path_factory.mktemp("tiny-reranker")
    make_tiny_cross_encoder(out, seed=0)
    return out


@pytest.fixture
def varied_texts() -> list[str]:
    """About 20 texts of varied language, length and style."""
    return list(VARIED_TEXTS)

"""Fixtures of the training tests: a tiny encoder checkpoint to start training from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import write_tiny_encoder


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide BERT encoder checkpoint over MiniLM's vocabulary (an init in seconds)."""
    pytest.importorskip("transformers")
    return write_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))

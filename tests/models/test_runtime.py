"""Session creation: provider fallback and load errors."""

from __future__ import annotations

import logging
from pathlib import Path

import onnxruntime as ort
import pytest

from models import ModelLoadError, load_embedder
from models.runtime import active_provider, create_session


@pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="CUDA is really available"
)
def test_unavailable_provider_falls_back_to_cpu_with_one_warning(
    tiny_embedder_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="models.runtime"):
        embedder = load_embedder(tiny_embedder_dir, provider="cuda")
    assert embedder.provider == "cpu"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "cuda" in warnings[0].getMessage()
    assert embedder.embed(["still works"]).shape == (1, embedder.dimensions)


def test_cpu_session_reports_cpu(tiny_embedder_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        session = create_session(tiny_embedder_dir / "model.onnx", "cpu", intra_op_threads=1)
    assert active_provider(session) == "cpu"
    assert not [r for r in caplog.records if r.name == "models.runtime"]


def test_unknown_provider_is_a_configuration_error(tiny_embedder_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        create_session(tiny_embedder_dir / "model.onnx", "tpu")


def test_missing_and_corrupt_graphs_raise_with_path(tmp_path: Path) -> None:
    missing = tmp_path / "absent.onnx"
    with pytest.raises(ModelLoadError, match=str(missing)):
        create_session(missing)
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07this is not a protobuf graph")
    with pytest.raises(ModelLoadError, match=str(corrupt)) as info:
        create_session(corrupt)
    assert "ONNX Runtime cannot load" in str(info.value)

"""Manifest round trip, validation and checksum verification."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from models import ModelLoadError, ModelManifest, read_manifest, verify_checksum, write_manifest
from models.manifest import compute_checksum


def _manifest(**changes: object) -> ModelManifest:
    base = ModelManifest(
        name="m",
        task="embed",
        dimensions=8,
        pooling="mean",
        normalize=True,
        max_length=16,
        version=1,
        checksum="0" * 64,
        onnx_file="model.onnx",
        quantization="none",
    )
    return base.replace(**changes)


def test_round_trip(tmp_path: Path) -> None:
    manifest = _manifest(query_prefix="query: ", architecture="bert", source="here")
    write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path) == manifest


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    write_manifest(tmp_path, _manifest())
    path = tmp_path / "manifest.json"
    path.write_text(path.read_text().replace('"name"', '"future_field": 1, "name"'))
    assert read_manifest(tmp_path) == _manifest()


@pytest.mark.parametrize(
    "changes",
    [
        {"task": "classify"},
        {"pooling": "max"},
        {"quantization": "fp16"},
        {"dimensions": 0},
        {"onnx_file": "../elsewhere.onnx"},
    ],
)
def test_invalid_fields_are_rejected(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        _manifest(**changes)


def test_missing_or_broken_manifest_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=str(tmp_path)):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match=r"manifest\.json"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text('{"name": "x"}')
    with pytest.raises(ModelLoadError, match="invalid manifest"):
        read_manifest(tmp_path)


def test_checksum_mismatch_is_detected(tmp_path: Path) -> None:
    onnx_file = tmp_path / "model.onnx"
    onnx_file.write_bytes(b"graph bytes")
    assert compute_checksum(onnx_file) == hashlib.sha256(b"graph bytes").hexdigest()
    manifest = _manifest(checksum=compute_checksum(onnx_file))
    assert verify_checksum(tmp_path, manifest)
    onnx_file.write_bytes(b"graph bytes, tampered")
    assert not verify_checksum(tmp_path, manifest)
    onnx_file.unlink()
    assert not verify_checksum(tmp_path, manifest)

"""The model manifest: what a prepared model directory contains and how to run it.

A prepared model directory holds ``manifest.json``, the ONNX file it names, and ``tokenizer.json``.
The manifest is the single source of truth for pooling, normalisation, prefixes and limits, so the
runtime never has to guess them from the graph.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from models.errors import ModelLoadError

MANIFEST_FILE = "manifest.json"

Task = Literal["embed", "rerank"]
Pooling = Literal["mean", "cls", "none"]
Quantization = Literal["none", "int8"]

_TASKS = ("embed", "rerank")
_POOLINGS = ("mean", "cls", "none")
_QUANTIZATIONS = ("none", "int8")


@dataclass(frozen=True)
class ModelManifest:
    """Description of a prepared model directory (serialised as ``manifest.json``)."""

    name: str
    task: Task
    dimensions: int
    """Embedding size for ``embed``; number of labels (usually 1) for ``rerank``."""
    pooling: Pooling
    normalize: bool
    max_length: int
    """Maximum sequence length in tokens, special tokens included."""
    version: int
    checksum: str
    """sha256 hex digest of the ONNX file (and of its external-data files, if any)."""
    onnx_file: str
    quantization: Quantization
    query_prefix: str = ""
    passage_prefix: str = ""
    architecture: str = "unknown"
    source: str = ""
    training: dict[str, Any] | None = None
    """How a model trained here was made (``sidecar train-reranker``): what it was initialised
    from, the forum and date, its pairs, held-out figures, and the score it corrects. None for
    a model prepared from elsewhere."""

    def __post_init__(self) -> None:
        # Validate eagerly: a bad manifest should fail at start-up, not on the first request.
        if self.task not in _TASKS:
            raise ValueError(f"task must be one of {_TASKS}, got {self.task!r}")
        if self.pooling not in _POOLINGS:
            raise ValueError(f"pooling must be one of {_POOLINGS}, got {self.pooling!r}")
        if self.quantization not in _QUANTIZATIONS:
            raise ValueError(
                f"quantization must be one of {_QUANTIZATIONS}, got {self.quantization!r}"
            )
        if self.dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {self.dimensions}")
        if self.max_length < 3:
            raise ValueError(f"max_length must be >= 3, got {self.max_length}")
        if Path(self.onnx_file).is_absolute() or ".." in Path(self.onnx_file).parts:
            raise ValueError(
                f"onnx_file must be a relative path inside the model dir: {self.onnx_file}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return the manifest as a JSON-serialisable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelManifest:
        """Build a manifest from a dict, ignoring unknown keys (forward compatibility)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def replace(self, **changes: Any) -> ModelManifest:
        """Return a copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def read_manifest(model_dir: str | Path) -> ModelManifest:
    """Read ``manifest.json`` from ``model_dir``; raises :class:`ModelLoadError` on any problem."""
    path = Path(model_dir) / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelLoadError(path, "manifest.json not found (run `models prepare` first)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(path, f"unreadable manifest: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(path, "manifest must be a JSON object")
    try:
        return ModelManifest.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise ModelLoadError(path, f"invalid manifest: {exc}") from exc


def write_manifest(model_dir: str | Path, manifest: ModelManifest) -> Path:
    """Write ``manifest.json`` atomically (it is the marker of a complete model directory)."""
    directory = Path(model_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / MANIFEST_FILE
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".manifest-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(manifest.to_dict(), fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def external_data_files(onnx_path: Path) -> list[Path]:
    """Return the external-data files an ONNX model references (empty for self-contained models)."""
    # Fork safety: only checksums need onnx; gunicorn masters import models.manifest to check
    # model folders before they fork, so it stays light.
    import onnx

    try:
        proto = onnx.load(str(onnx_path), load_external_data=False)
    except Exception:
        # A corrupt graph has no readable references; the checksum of the main file will differ.
        return []
    locations: set[str] = set()
    for tensor in proto.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    locations.add(entry.value)
    return [onnx_path.parent / loc for loc in sorted(locations)]


def compute_checksum(onnx_path: str | Path) -> str:
    """sha256 hex digest of an ONNX file followed by its external-data files (sorted by name).

    For the usual self-contained model this is exactly ``sha256(model.onnx)``.
    """
    path = Path(onnx_path)
    digest = hashlib.sha256()
    for part in [path, *external_data_files(path)]:
        with part.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def verify_checksum(model_dir: str | Path, manifest: ModelManifest) -> bool:
    """Return True when the ONNX file in ``model_dir`` matches ``manifest.checksum``.

    A missing file counts as a mismatch rather than an exception, so callers can decide whether
    to re-export (``prepare``) or to fail start-up (the runtime raises ``ModelLoadError``).
    """
    path = Path(model_dir) / manifest.onnx_file
    try:
        return compute_checksum(path) == manifest.checksum
    except OSError:
        return False

"""A trained checkpoint becomes a model directory the reranking path loads unchanged.

The torch-free exporter (:func:`models.prepare.prepare_model`) writes the ONNX graph (int8, per
channel, for CPUs; fp32 for a GPU), its tokenizer and manifest; the manifest then gets the
training record: what the model was initialised from, the forum and date, the pairs, its
held-out figures and the cosine it corrects (read back by
:func:`sidecar.runtime.model_loading.residual_of`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from models.manifest import read_manifest, write_manifest
from models.names import check_model_name
from models.prepare import prepare_model
from sidecar.core.rerank_score import Residual


def residual_record(residual: Residual | None) -> dict[str, Any] | None:
    """The manifest's form of the cosine a model corrects."""
    if residual is None:
        return None
    return {"model": residual.model, "strategy": residual.strategy,
            "cosine_weight": residual.cosine_weight, "bias": residual.bias}


def export_reranker(checkpoint: Path, out: Path, *, name: str, quantize: bool,
                    training: dict[str, Any]) -> Path:
    """Export ``checkpoint`` to the new model directory ``out`` named ``name``, with
    ``training`` recorded in its manifest. ``out`` must not exist (FileExistsError): a model is
    never replaced, and nothing already there is ever deleted (:mod:`models.names`)."""
    check_model_name(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.mkdir()  # claims the name: fails if anything is there, even from a run started alongside
    prepare_model(str(checkpoint), task="rerank", out_dir=out,
                  quantize="int8" if quantize else None, name=name)
    manifest = read_manifest(out)
    write_manifest(out, manifest.replace(training=training))
    return out


def record_figures(model_dir: Path, figures: dict[str, Any],
                   seconds: dict[str, float] | None = None) -> None:
    """Add the guard's held-out figures (and each stage's wall time) to a model's record."""
    manifest = read_manifest(model_dir)
    training = dict(manifest.training or {})
    training["held_out"] = figures
    if seconds is not None:
        training["seconds"] = seconds
    write_manifest(model_dir, manifest.replace(training=training))

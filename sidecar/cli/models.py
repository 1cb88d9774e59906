"""`sidecar models prepare` (export, quantize, describe) and `sidecar models check`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).


@click.group()
def models() -> None:
    """Model preparation."""


@models.command("prepare")
@click.argument("source")
@click.option("--task", type=click.Choice(["embed", "rerank"]), required=True)
@click.option("--quantize", type=click.Choice(["int8"]), default=None)
@click.option("--name", default=None, help="Registry name (default: derived from SOURCE).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output directory (default: <state_dir>/models/<name>).")
@click.pass_obj
def prepare(settings: Settings, source: str, task: str, quantize: str | None,
            name: str | None, out: Path | None) -> None:
    """Export NAME_OR_PATH to ONNX (optionally int8) with a manifest."""
    from models import ModelError, prepare_model
    from sidecar.errors import ConfigurationError

    label = name or source.rstrip("/").split("/")[-1].lower()
    target = out or settings.models_dir / label
    try:
        manifest = prepare_model(source, task, target, quantize=quantize, name=label)
    except ModelError as exc:  # one clear line (missing extra, offline hub, bad checkpoint)
        raise ConfigurationError(f"cannot prepare {source}: {exc}") from exc
    echo_json({"path": str(target), **manifest.to_dict()})


def _describe(model: Any) -> dict[str, Any]:
    session = getattr(model, "session", None)
    return {"name": model.name, "provider": model.provider,
            "session_providers": list(session.get_providers()) if session is not None else None}


@models.command("check")
@click.pass_obj
def check(settings: Settings) -> None:
    """Load the configured models; print the ONNX Runtime build and the provider really used.

    Exits 1 when a model runs on another provider than SIDECAR_ONNX_PROVIDER asks (the wrong
    build installed, a missing driver: ONNX Runtime then falls back to the CPU).
    """
    from models.runtime import runtime_report
    from sidecar.runtime.model_loading import load_embedder, load_reranker

    report: dict[str, Any] = {"onnxruntime": runtime_report(),
                              "requested_provider": settings.onnx_provider}
    loaded: list[Any] = [load_embedder(settings)]
    reranker, error = load_reranker(settings)
    loaded += [reranker] if reranker is not None else []
    try:
        report["embedder"] = _describe(loaded[0])
        report["reranker"] = _describe(reranker) if reranker is not None else error
    finally:
        for model in loaded:
            close = getattr(model, "close", None)
            if callable(close):
                close()
    echo_json(report)
    local = [m for m in loaded if getattr(m, "session", None) is not None]
    wrong = [m.name for m in local if m.provider != settings.onnx_provider]
    if wrong:
        click.secho(f"error: {', '.join(wrong)} not running on {settings.onnx_provider!r} "
                    f"(see onnxruntime.available_providers)", fg="red", err=True)
        sys.exit(1)

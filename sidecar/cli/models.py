"""`sidecar models prepare`: export, quantize and describe a model directory."""

from __future__ import annotations

from pathlib import Path

import click

from sidecar.settings import Settings


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
    from sidecar.cli.main import echo_json
    from sidecar.errors import ConfigurationError

    label = name or source.rstrip("/").split("/")[-1].lower()
    target = out or settings.models_dir / label
    try:
        manifest = prepare_model(source, task, target, quantize=quantize, name=label)
    except ModelError as exc:  # one clear line (missing extra, offline hub, bad checkpoint)
        raise ConfigurationError(f"cannot prepare {source}: {exc}") from exc
    echo_json({"path": str(target), **manifest.to_dict()})

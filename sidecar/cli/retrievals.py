"""`sidecar retrievals purge`: keep the retrieval log to its retention period."""

from __future__ import annotations

import click

from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).


@click.group()
def retrievals() -> None:
    """The log of /v1/retrieve answers (evidence for /v1/sanitize, moderator review)."""


@retrievals.command("purge")
@click.option("--days", type=click.IntRange(min=1), default=None,
              help="Keep this many days (default: SIDECAR_RETRIEVAL_RETENTION_DAYS).")
@click.pass_obj
def purge(settings: Settings, days: int | None) -> None:
    """Delete unlabelled retrievals older than the retention period (labelled ones stay)."""
    from sidecar.db import Database
    from sidecar.db.migrate import upgrade
    from sidecar.db.retrievals import purge_retrievals
    from sidecar.runtime.dbsession import database_conninfo, session_limits
    from sidecar.runtime.services import resolve_services

    keep = days or settings.retrieval_retention_days
    upgrade(database_conninfo(settings, "migrate"))
    db = Database(resolve_services(settings).database_url, min_size=1, max_size=1,
                  limits=session_limits(settings, "command"))
    db.open()
    try:
        with db.connection() as conn:
            deleted = purge_retrievals(conn, keep)
    finally:
        db.close()
    echo_json({"deleted": deleted, "kept_days": keep})

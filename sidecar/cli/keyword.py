"""`sidecar keyword rebuild | sync | status`: this node's keyword index (no model needed)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).


@contextlib.contextmanager
def _database(settings: Settings) -> Iterator[Any]:
    from sidecar.db import Database
    from sidecar.db.migrate import upgrade
    from sidecar.runtime.dbsession import database_conninfo, session_limits
    from sidecar.runtime.services import resolve_services

    upgrade(database_conninfo(settings, "migrate"))
    db = Database(resolve_services(settings).database_url, min_size=1, max_size=2,
                  limits=session_limits(settings, "command"))
    db.open()
    try:
        yield db
    finally:
        db.close()


def _status(db: Any, index: Any) -> dict[str, Any]:
    from sidecar.db.keyword_sql import last_change

    info = index.describe()
    with db.connection() as conn:
        info["log_last_change"] = last_change(conn)
    if info.get("state") == "ready":
        info["behind"] = info["log_last_change"] - info["last_change"]
    return info


@click.group()
def keyword() -> None:
    """This node's keyword index: Tantivy (BM25) over the forum's public posts."""


@keyword.command("rebuild")
@click.option("--all-nodes", is_flag=True,
              help="Also ask every other node, through the change log, to rebuild its own.")
@click.pass_obj
def rebuild(settings: Settings, all_nodes: bool) -> None:
    """Build this node's index anew from the public posts (embeds nothing), then switch to it.

    Searches keep using the previous index until the new one is ready.
    """
    from sidecar.keyword import KeywordIndex
    from sidecar.keyword.changes import ask_every_node_to_rebuild

    with _database(settings) as db:
        if all_nodes:
            ask_every_node_to_rebuild(db)
        index = KeywordIndex(db, settings.state_dir, settings.ts_config)
        report = index.rebuild()
        echo_json({"report": report.as_dict(), "index": _status(db, index)})


@keyword.command("sync")
@click.pass_obj
def sync(settings: Settings) -> None:
    """Log the changes that came without an index event, prune the old log, and apply it to
    this node's index (built first if missing)."""
    from sidecar.keyword import KeywordIndex
    from sidecar.keyword.changes import catch_up

    with _database(settings) as db:
        logged = catch_up(db, keep_days=settings.keyword_log_days)
        index = KeywordIndex(db, settings.state_dir, settings.ts_config)
        report = index.sync()
        echo_json({"log": logged, "report": report.as_dict() if report else None,
                   "index": _status(db, index)})


@keyword.command("status")
@click.pass_obj
def status(settings: Settings) -> None:
    """This node's index: documents, when built and synced, how far behind the change log."""
    from sidecar.keyword import KeywordIndex

    with _database(settings) as db:
        echo_json(_status(db, KeywordIndex(db, settings.state_dir, settings.ts_config)))

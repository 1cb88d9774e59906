"""`sidecar db upgrade | grants | check-grants | owner-sql`: the schema, and the rights of the
sidecar's database role on a live forum (docs/deployment.md, "A least-privilege role")."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

if TYPE_CHECKING:
    from sidecar.db.owner import IndexBuild

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).

ROLE_HELP = "The sidecar's role (a plain lower-case name)."


@click.group()
def db() -> None:
    """Database schema and the sidecar's rights on it."""


def _index_build(settings: Settings) -> IndexBuild:
    from sidecar.db.owner import IndexBuild

    return IndexBuild(kind=settings.index_kind, m=settings.hnsw_m,
                      ef_construction=settings.hnsw_ef_construction,
                      build_mem=settings.index_build_mem)


@db.command("upgrade")
@click.option("--as-owner", is_flag=True,
              help="Connected as a superuser (DATABASE_URL): grant --role its rights, then do "
                   "what only the owner of ai_posts_embeddings can (its indexes).")
@click.option("--role", default="sidecar", show_default=True, help=ROLE_HELP)
@click.pass_obj
def db_upgrade(settings: Settings, as_owner: bool, role: str) -> None:
    """Create or upgrade the schema (idempotent); --as-owner: the owner's part instead."""
    from sidecar.db.migrate import upgrade
    from sidecar.db.owner import upgrade_as_owner
    from sidecar.runtime.dbsession import database_conninfo

    if as_owner:
        echo_json(upgrade_as_owner(database_conninfo(settings, "index"), role,
                                   _index_build(settings)))
        return
    echo_json(upgrade(database_conninfo(settings, "migrate")))


@db.command("grants")
@click.option("--role", default="sidecar", show_default=True, help=ROLE_HELP)
def db_grants(role: str) -> None:
    """Print the SQL of the least-privilege role, for psql as a superuser (no connection)."""
    from sidecar.db.grants import grants_script

    click.echo(grants_script(role), nl=False)


@db.command("check-grants")
@click.pass_obj
def db_check_grants(settings: Settings) -> None:
    """Say what the role of DATABASE_URL lacks or has beyond its needs; exit 1 if anything."""
    import psycopg

    from sidecar.db.grants_check import check_grants
    from sidecar.runtime.dbsession import database_conninfo

    with psycopg.connect(database_conninfo(settings, "command")) as conn:
        report = check_grants(conn)
    echo_json(report.as_dict())
    if not report.ok:
        sys.exit(1)


@db.command("owner-sql")
@click.pass_obj
def db_owner_sql(settings: Settings) -> None:
    """Print what the owner of ai_posts_embeddings must run now (its indexes), for psql."""
    import psycopg
    from psycopg.rows import dict_row

    from sidecar.db.owner import owner_script
    from sidecar.runtime.dbsession import database_conninfo

    with psycopg.connect(database_conninfo(settings, "command"), row_factory=dict_row) as conn:
        click.echo(owner_script(conn, _index_build(settings)), nl=False)

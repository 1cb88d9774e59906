"""``sidecar_meta``: small named values the sidecar keeps about its own state, and databases.

The keyword index's keys are read and moved in :mod:`sidecar.db.keyword_sql` (they need row
locks); what else records a fact by name (the evaluation's import and embedding markers) uses
:func:`get_meta` / :func:`set_meta`.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from sidecar.db.pool import DictConn


def get_meta(conn: DictConn, key: str) -> str | None:
    """The value stored under ``key``, if any."""
    row = conn.execute("SELECT value FROM sidecar_meta WHERE key = %s", (key,)).fetchone()
    return str(row["value"]) if row else None


def set_meta(conn: DictConn, key: str, value: str) -> None:
    """Store (or replace) the value under ``key``."""
    conn.execute(
        "INSERT INTO sidecar_meta (key, value) VALUES (%s, %s)"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (key, value),
    )


def create_database(conn: psycopg.Connection[Any], name: str) -> bool:
    """Create database ``name`` unless it exists (``conn``: autocommit, on the server's
    maintenance database). True when this call created it; a concurrent creation counts as
    existing. Lacking CREATEDB raises ``psycopg.errors.InsufficientPrivilege``."""
    if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
        return False
    try:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.DuplicateDatabase:
        return False  # another process created it at the same moment
    return True


def copy_database(conn: psycopg.Connection[Any], name: str, template: str) -> bool:
    """Create database ``name`` as a copy of ``template`` unless ``name`` exists (``conn``:
    autocommit, on the maintenance database). True when this call copied it. PostgreSQL
    refuses while another session is connected to ``template``
    (``psycopg.errors.ObjectInUse``): the caller decides whether to wait or build otherwise."""
    if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
        return False
    conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
        sql.Identifier(name), sql.Identifier(template)))
    return True


def database_exists(conn: psycopg.Connection[Any], name: str) -> bool:
    """Whether the server has database ``name``."""
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                        (name,)).fetchone() is not None

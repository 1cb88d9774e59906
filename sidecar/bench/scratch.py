"""Scratch databases for benchmark parts: created fresh on the bench server, dropped after."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo


def _drop(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


@contextmanager
def scratch_database(admin_url: str, label: str) -> Iterator[str]:
    """An empty database ``sidecar_bench_<label>_<pid>`` for the block; yields its URL.

    A leftover of a killed run with the same name is dropped first.
    """
    name = f"sidecar_bench_{label}_{os.getpid()}"
    _drop(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin_url, dbname=name)
    finally:
        _drop(admin_url, name)

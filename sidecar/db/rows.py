"""Typed rows: a query's rows as instances of a dataclass, through psycopg's ``class_row``.

The pool's connections return dict rows (``sidecar.db.pool``); a query whose rows leave this
package is read with these instead, so callers get frozen dataclasses with named, typed fields.
"""

from __future__ import annotations

from typing import Any, LiteralString, TypeAlias, TypeVar

import psycopg
from psycopg import sql
from psycopg.abc import Params
from psycopg.rows import class_row

T = TypeVar("T")
# What Cursor.execute takes with parameters (psycopg >= 3.2; 3.3 names it QueryNoTemplate).
Query: TypeAlias = LiteralString | bytes | sql.SQL | sql.Composed


def fetch_one(conn: psycopg.Connection[Any], cls: type[T], query: Query,
              params: Params | None = None) -> T | None:
    """The first row of ``query`` as a ``cls``, or None."""
    with conn.cursor(row_factory=class_row(cls)) as cur:
        return cur.execute(query, params).fetchone()


def fetch_all(conn: psycopg.Connection[Any], cls: type[T], query: Query,
              params: Params | None = None) -> list[T]:
    """Every row of ``query``, each a ``cls``."""
    with conn.cursor(row_factory=class_row(cls)) as cur:
        return cur.execute(query, params).fetchall()

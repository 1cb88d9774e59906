"""A connection pool on which every connection knows pgvector's types."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from sidecar.errors import ServiceUnavailable

log = logging.getLogger(__name__)

# Pooled connections return rows as dicts.
DictConn: TypeAlias = psycopg.Connection[dict[str, Any]]


def _configure(conn: psycopg.Connection[Any]) -> None:
    # As pgvector-python recommends: register the vector types on each pooled connection.
    register_vector(conn)


class Database:
    """The sidecar's handle on PostgreSQL: a pool of connections with pgvector registered."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8) -> None:
        self.url = url
        self.pool: ConnectionPool[DictConn] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            configure=_configure,
            # A connection is checked (one empty round trip) before it is lent: after a
            # PostgreSQL restart, stale connections are replaced instead of failing a request.
            check=ConnectionPool.check_connection,
            kwargs={"row_factory": dict_row, "autocommit": False},
            open=False,
            name="sidecar",
        )

    def open(self, timeout: float = 30.0) -> None:
        """Open the pool and wait until a first connection works."""
        self.pool.open(wait=True, timeout=timeout)

    def close(self) -> None:
        """Close every connection."""
        self.pool.close()

    @contextmanager
    def connection(self, timeout: float = 30.0) -> Iterator[DictConn]:
        """A pooled connection; the transaction commits on success and rolls back on error."""
        try:
            with self.pool.connection(timeout=timeout) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            # The driver's message names host, port and user: for the log, not the response.
            raise ServiceUnavailable("the database is unavailable right now; retry shortly",
                                     internal=str(exc)) from exc

    def ping(self) -> bool:
        """True when the database answers a trivial query."""
        try:
            with self.connection() as conn:
                conn.execute("SELECT 1")
            return True
        except Exception:  # readiness must answer, not raise
            log.exception("database ping failed")
            return False

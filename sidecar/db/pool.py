"""A connection pool on which every connection knows pgvector's types and its limits.

Every connection the sidecar opens to the forum's PostgreSQL says who it is
(``application_name``: ``sidecar-api``, ``sidecar-worker``...) and how long it may wait
(``statement_timeout``, ``lock_timeout``, ``idle_in_transaction_session_timeout``), set at
connection start through libpq's ``options`` (:class:`SessionLimits`): a slow query or a lock
held by the forum costs the sidecar a timeout, never the forum a connection it keeps. Each
searches the sidecar's own schema first (:mod:`sidecar.db.schema`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from sidecar.db.schema import SEARCH_PATH_OPTION
from sidecar.errors import ConfigurationError, DatabaseTimeout, ServiceUnavailable

log = logging.getLogger(__name__)

# Pooled connections return rows as dicts.
DictConn: TypeAlias = psycopg.Connection[dict[str, Any]]


@dataclass(frozen=True)
class SessionLimits:
    """What one kind of connection sets when it starts: its name and its time limits."""

    application_name: str = "sidecar"
    statement_timeout_s: float = 300.0
    lock_timeout_s: float = 10.0
    idle_in_transaction_s: float = 60.0

    def options(self) -> str:
        """libpq ``options``: ``-c name=value`` for each limit (milliseconds)."""
        limits = {"statement_timeout": self.statement_timeout_s,
                  "lock_timeout": self.lock_timeout_s,
                  "idle_in_transaction_session_timeout": self.idle_in_transaction_s}
        return " ".join(f"-c {name}={max(1, round(seconds * 1000))}"
                        for name, seconds in limits.items())

    def conninfo(self, url: str) -> str:
        """``url`` with this name and these limits (options already in it are kept first), and
        the sidecar's search path (after them: a URL's own search_path never wins)."""
        given = str(conninfo_to_dict(url).get("options") or "")
        return make_conninfo(url, application_name=self.application_name,
                             options=f"{given} {self.options()} {SEARCH_PATH_OPTION}".strip())


def _configure(conn: psycopg.Connection[Any]) -> None:
    # As pgvector-python recommends: register the vector types on each pooled connection.
    register_vector(conn)


class Database:
    """The sidecar's handle on PostgreSQL: a pool of connections with pgvector registered."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8,
                 limits: SessionLimits | None = None) -> None:
        self.url = url
        self.limits = limits or SessionLimits()
        self.pool: ConnectionPool[DictConn] = ConnectionPool(
            self.limits.conninfo(url),
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
    def connection(self, timeout: float | None = None) -> Iterator[DictConn]:
        """A pooled connection; the transaction commits on success and rolls back on error.

        Waiting for a free connection counts against the same limit as a query (at most 30 s):
        a request never waits for the pool longer than it may wait for the database.
        """
        wait = timeout if timeout is not None else min(30.0, self.limits.statement_timeout_s)
        try:
            with self.pool.connection(timeout=wait) as conn:
                yield conn
        except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as exc:
            # statement_timeout or lock_timeout: the forum's database is busy or a lock is held
            # (a migration, a long transaction); the sidecar gives up rather than queue.
            raise DatabaseTimeout(
                "the forum's database did not answer within the sidecar's time limit (a slow "
                "query or a lock held on its tables); retry shortly",
                internal=f"{type(exc).__name__}: {exc}") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConfigurationError(
                "the sidecar's database role may not read or write what this needs: "
                "`sidecar db check-grants` says what it lacks", internal=str(exc)) from exc
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

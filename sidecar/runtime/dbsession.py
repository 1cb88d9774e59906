"""Which limits each kind of process puts on its connections to the forum's PostgreSQL.

API requests are short, so their queries are (a few seconds, and a lock is waited for even
less): a request that cannot have the forum's tables answers 503 rather than queue behind a
migration. Jobs and commands get minutes; index builds and imports hours, never more than
``SIDECAR_DB_INDEX_TIMEOUT_S``. Every one says who it is in ``application_name``, so the
forum's operator sees ``sidecar-api``, ``sidecar-worker``... in ``pg_stat_activity``.
"""

from __future__ import annotations

from typing import Literal

from sidecar.config.settings import Settings
from sidecar.db.pool import SessionLimits
from sidecar.runtime.services import resolve_database

# "metrics": the API's scrape-time reads of the database, on a connection outside its pool.
Purpose = Literal["api", "metrics", "worker", "backfill", "command", "index", "import",
                  "migrate"]
# How long an index build may wait for a lock. CREATE INDEX CONCURRENTLY waits for every
# transaction older than it to end (it blocks none of them meanwhile); past this it gives up,
# leaving an invalid index that the next build drops and builds again.
INDEX_LOCK_TIMEOUT_S = 600.0
# Pools of processes that load no model: they enqueue and watch, one query at a time.
LIGHT_POOL = (1, 2)


def session_limits(settings: Settings, purpose: Purpose) -> SessionLimits:
    """The name and time limits of a ``purpose``'s connections."""
    name = f"sidecar-{purpose}"
    idle = settings.db_idle_in_transaction_s
    if purpose in ("api", "metrics"):
        return SessionLimits(name, settings.db_api_timeout_s, settings.db_api_lock_timeout_s,
                             idle)
    if purpose in ("index", "import"):
        timeout = settings.db_index_timeout_s
        return SessionLimits(name, timeout, min(timeout, INDEX_LOCK_TIMEOUT_S), idle)
    return SessionLimits(name, settings.db_job_timeout_s, settings.db_job_lock_timeout_s, idle)


def pool_size(settings: Settings, purpose: Purpose, *, load_models: bool) -> tuple[int, int]:
    """(min, max) connections of one process's pool: what PostgreSQL's ``max_connections``
    must hold, per process (docs/deployment.md, "Connections")."""
    if purpose == "worker":
        return 1, settings.worker_db_pool_max
    if not load_models:
        return LIGHT_POOL
    return min(settings.db_pool_min, settings.db_pool_max), settings.db_pool_max


def database_conninfo(settings: Settings, purpose: Purpose) -> str:
    """The database's connection string (the embedded one started if need be) with a
    ``purpose``'s name and limits, for commands that connect outside a pool."""
    return session_limits(settings, purpose).conninfo(resolve_database(settings))

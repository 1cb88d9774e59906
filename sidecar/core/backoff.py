"""When the forum's database is too busy for the backfill: the rule, on numbers read elsewhere.

discourse-ai's backfill yields to the forum by running small batches on a schedule; the
sidecar's also looks before each batch, and waits while the database is busy: too many queries
running in it (other than the sidecar's own), its connections near ``max_connections``, or a
replica too far behind. A number the database role may not see (another session's state, a
replica's lag: they need ``pg_read_all_stats``) is ``None`` and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DbLoad:
    """How busy the database is, as far as the sidecar's role can see."""

    active: int | None  # queries running in the forum's database, not the sidecar's
    connections: int  # connections to the server, every database
    max_connections: int
    replication_lag_s: float | None  # the worst replica's replay lag


@dataclass(frozen=True)
class LoadLimits:
    """Past these the backfill waits (``SIDECAR_BACKFILL_MAX_*``; 0: no limit)."""

    max_active: int = 16
    max_connections_pct: float = 80.0
    max_replication_lag_s: float = 30.0


def busy_reason(load: DbLoad, limits: LoadLimits) -> str | None:
    """Why the backfill should wait now, or None when it may go on."""
    if limits.max_active and load.active is not None and load.active > limits.max_active:
        return f"{load.active} queries running in the forum's database (limit {limits.max_active})"
    if limits.max_connections_pct and load.max_connections > 0:
        share = 100.0 * load.connections / load.max_connections
        if share > limits.max_connections_pct:
            return (f"{load.connections} of {load.max_connections} connections in use "
                    f"({share:.0f}% > {limits.max_connections_pct:g}%)")
    if (limits.max_replication_lag_s and load.replication_lag_s is not None
            and load.replication_lag_s > limits.max_replication_lag_s):
        return (f"a replica is {load.replication_lag_s:.0f} s behind "
                f"(limit {limits.max_replication_lag_s:g} s)")
    return None

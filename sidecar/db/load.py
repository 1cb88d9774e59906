"""How busy the forum's database is: what :mod:`sidecar.core.backoff` decides on.

Read from the statistics views every role may read; another session's state and a replica's lag
are shown only to roles with ``pg_read_all_stats`` (``pg_monitor``), so without it they come back
``None``. The sidecar's own sessions (``application_name`` ``sidecar-*``) are not counted.
"""

from __future__ import annotations

from sidecar.core.backoff import DbLoad
from sidecar.db.pool import DictConn

_LOAD = """
SELECT CASE WHEN pg_has_role('pg_read_all_stats', 'USAGE') THEN
         (SELECT count(*) FROM pg_stat_activity a
          WHERE a.datname = current_database() AND a.state = 'active'
            AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
            AND a.application_name NOT LIKE 'sidecar-%%')
       END AS active,
       (SELECT coalesce(sum(numbackends), 0) FROM pg_stat_database) AS connections,
       current_setting('max_connections')::int AS max_connections,
       (SELECT max(extract(epoch FROM replay_lag)) FROM pg_stat_replication) AS lag
"""


def database_load(conn: DictConn) -> DbLoad:
    """The database's load now."""
    row = conn.execute(_LOAD).fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    return DbLoad(active=None if row["active"] is None else int(row["active"]),
                  connections=int(row["connections"]),
                  max_connections=int(row["max_connections"]),
                  replication_lag_s=None if row["lag"] is None else float(row["lag"]))

"""PostgreSQL adapter: connection pool, migrations and the SQL of every query."""

from sidecar.db.pool import Database

__all__ = ["Database"]

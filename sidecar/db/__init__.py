"""PostgreSQL adapter: connection pool, migrations and the SQL of every query.

The only SQL of the sidecar (``scripts/check_sql.py``); rows come back as frozen dataclasses.
Imports: ``core``, ``errors`` and ``dump_format`` (the rows an import writes). Imported by the
capabilities, ``runtime``, ``jobs`` and the layers above.
"""

from sidecar.db.pool import Database

__all__ = ["Database"]

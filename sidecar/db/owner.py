"""What only the owner of ``ai_posts_embeddings`` (or a superuser) can do for the sidecar.

The table lives in the forum's schema (``public``), where discourse-ai keeps it, and the sidecar's
least-privilege role may create nothing there (:mod:`sidecar.db.schema`): it reads and writes its
rows but cannot index it. Where discourse-ai has not made the table, its owner makes it (the SQL
of ``sidecar db grants``, or this script); its lookup index and the HNSW index of each (model,
strategy) are built by the owner, once, and again after a backfill of a new model (``sidecar db
upgrade --as-owner``, or the SQL of ``sidecar db owner-sql`` piped into psql where the owner is
reached only from inside the forum's container). Every index on a table in use is built
``CONCURRENTLY``: the forum keeps writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row, tuple_row

from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.embeddings import pairs_with_vectors, registered_model
from sidecar.db.grants import apply_grants, check_role
from sidecar.db.pool import DictConn
from sidecar.db.schema import (
    FORUM_SCHEMA,
    LOOKUP_INDEX,
    SCHEMA,
    UNIQUE_INDEX,
    VECTOR_TABLE,
    VECTOR_TABLE_DDL,
    with_search_path,
)
from sidecar.db.vector_index import (
    check_build_mem,
    drop_invalid,
    index_name,
    index_statement,
    index_valid,
)


@dataclass(frozen=True)
class IndexBuild:
    """How the owner builds HNSW indexes (the settings' kind, m, ef_construction, memory)."""

    kind: str = "halfvec"
    m: int = 16
    ef_construction: int = 128
    build_mem: str = ""  # checked (check_build_mem) and sent as a literal, never pasted


def _has_key(conn: psycopg.Connection[Any]) -> bool:
    # discourse-ai's own unique index, or any unique index on the same key.
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = %s"
        " AND tablename = %s AND indexdef LIKE 'CREATE UNIQUE INDEX %%'"
        " AND indexdef LIKE '%%(model_id, strategy_id, post_id)%%')",
        (FORUM_SCHEMA, VECTOR_TABLE)).fetchone()
    return bool(row and row[0])


def vector_key_missing(conn: psycopg.Connection[Any]) -> bool:
    """True when ``ai_posts_embeddings`` exists without its unique key (upserts need it)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{FORUM_SCHEMA}.{VECTOR_TABLE}",)).fetchone()
    return bool(row and row[0]) and not _has_key(conn)


def owner_steps(conn: DictConn, build: IndexBuild) -> list[str]:
    """The SQL the owner must run now, in order (none when everything is there).

    ``conn`` is the sidecar's role's (``sidecar db owner-sql``) or the owner's; a table made
    here is granted to the connected role.
    """
    steps: list[str] = []
    found = conn.execute(
        "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector,"
        " to_regclass(%s) IS NOT NULL AS vectors, to_regclass(%s) IS NOT NULL AS registry,"
        " current_user AS role",
        (f"{FORUM_SCHEMA}.{VECTOR_TABLE}", f"{SCHEMA}.sidecar_embedding_models")).fetchone()
    assert found is not None
    if found["vector"] is None:
        steps.append(f"CREATE EXTENSION IF NOT EXISTS vector SCHEMA {FORUM_SCHEMA}")
    if not found["vectors"]:
        # Where discourse-ai has not made it (the SQL of `sidecar db grants` makes it too).
        role = check_role(str(found["role"]))
        return [*steps, *VECTOR_TABLE_DDL,
                f'GRANT SELECT, INSERT, UPDATE, DELETE ON {FORUM_SCHEMA}.{VECTOR_TABLE}'
                f' TO "{role}"']
    if not _has_key(conn):
        steps.append(f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {UNIQUE_INDEX} ON "
                     f"{VECTOR_TABLE} (model_id, strategy_id, post_id)")
    if index_valid(conn, LOOKUP_INDEX) is not True:
        if index_valid(conn, LOOKUP_INDEX) is False:
            steps.append(drop_invalid(LOOKUP_INDEX).as_string(conn))
        steps.append(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {LOOKUP_INDEX} ON "
                     f"{VECTOR_TABLE} (post_id, model_id)")
    if not found["registry"]:
        return steps
    hnsw: list[str] = []
    for model_id, strategy in pairs_with_vectors(conn, sorted(STRATEGY_VERSIONS)):
        model = registered_model(conn, model_id)
        name = index_name(model.id, strategy, build.kind)
        valid = index_valid(conn, name)
        if valid:
            continue
        if valid is False:
            hnsw.append(drop_invalid(name).as_string(conn))
        hnsw.append(index_statement(model, strategy, build.kind, m=build.m,
                                    ef_construction=build.ef_construction).as_string(conn))
    if hnsw and build.build_mem:
        hnsw.insert(0, sql.SQL("SET maintenance_work_mem = {}").format(
            sql.Literal(check_build_mem(build.build_mem))).as_string(conn))
    return steps + hnsw


def owner_script(conn: DictConn, build: IndexBuild) -> str:
    """:func:`owner_steps` as a psql script (each statement on its own: no transaction)."""
    steps = owner_steps(conn, build)
    head = ["-- forum-rag-sidecar: what the owner of ai_posts_embeddings runs now",
            "-- (`sidecar db owner-sql`), e.g. psql -v ON_ERROR_STOP=1 -d discourse -f owner.sql"]
    if not steps:
        return "\n".join([*head, "-- nothing to do"]) + "\n"
    return "\n".join([*head, *(f"{s};" for s in steps)]) + "\n"


def upgrade_as_owner(url: str, role: str, build: IndexBuild) -> dict[str, Any]:
    """Grant ``role`` its rights (:func:`sidecar.db.grants.apply_grants`), then run the owner's
    steps (``url``: a superuser's, or the owner's of the forum's tables)."""
    with psycopg.connect(with_search_path(url), autocommit=True, row_factory=dict_row) as conn:
        apply_grants(conn, role)
        steps = owner_steps(conn, build)
        for step in steps:
            conn.execute(step.encode())
    return {"role": role, "granted": True, "ran": steps}

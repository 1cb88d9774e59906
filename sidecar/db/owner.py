"""What only the owner of ``ai_posts_embeddings`` (or a superuser) can do for the sidecar.

Where discourse-ai made the table, the sidecar's least-privilege role reads and writes its rows
but cannot index it: its lookup index and the HNSW index of each (model, strategy) are built by
the owner, once, and again after a backfill of a new model (``sidecar db upgrade --as-owner``,
or the SQL of ``sidecar db owner-sql`` piped into psql where the owner is reached only from
inside the forum's container). Every index is built ``CONCURRENTLY``: the forum keeps writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.embeddings import pairs_with_vectors, registered_model
from sidecar.db.grants import VECTOR_TABLE, apply_grants
from sidecar.db.pool import DictConn
from sidecar.db.vector_index import drop_invalid, index_name, index_statement, index_valid

UNIQUE_INDEX = "index_ai_posts_embeddings_on_model_strategy_post"
LOOKUP_INDEX = "sidecar_ai_posts_embeddings_post_model"


@dataclass(frozen=True)
class IndexBuild:
    """How the owner builds HNSW indexes (the settings' kind, m, ef_construction, memory)."""

    kind: str = "halfvec"
    m: int = 16
    ef_construction: int = 128
    build_mem: str = ""


def _has_key(conn: psycopg.Connection[Any]) -> bool:
    # discourse-ai's own unique index, or any unique index on the same key.
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = 'public'"
        " AND tablename = %s AND indexdef LIKE 'CREATE UNIQUE INDEX %%'"
        " AND indexdef LIKE '%%(model_id, strategy_id, post_id)%%')", (VECTOR_TABLE,)).fetchone()
    return bool(row and row[0])


def vector_key_missing(conn: psycopg.Connection[Any]) -> bool:
    """True when ``ai_posts_embeddings`` exists without its unique key (upserts need it)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"public.{VECTOR_TABLE}",)).fetchone()
    return bool(row and row[0]) and not _has_key(conn)


def owner_steps(conn: DictConn, build: IndexBuild) -> list[str]:
    """The SQL the owner must run now, in order (none when everything is there)."""
    steps: list[str] = []
    found = conn.execute(
        "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector,"
        " to_regclass(%s) IS NOT NULL AS vectors,"
        " to_regclass('public.sidecar_embedding_models') IS NOT NULL AS registry",
        (f"public.{VECTOR_TABLE}",)).fetchone()
    assert found is not None
    if found["vector"] is None:
        steps.append("CREATE EXTENSION IF NOT EXISTS vector")
    if not found["vectors"]:
        return steps  # the sidecar's role creates the table itself, and owns it
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
        hnsw.insert(0, f"SET maintenance_work_mem = '{build.build_mem}'")
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
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        apply_grants(conn, role)
        steps = owner_steps(conn, build)
        for step in steps:
            conn.execute(step.encode())
    return {"role": role, "granted": True, "ran": steps}

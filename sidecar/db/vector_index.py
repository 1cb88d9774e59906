"""The partial HNSW index of each (model, strategy) over ai_posts_embeddings: name and build."""

from __future__ import annotations

import logging
import re
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sidecar.db.embeddings import RegisteredModel
from sidecar.db.schema import FORUM_SCHEMA, VECTOR_TABLE
from sidecar.errors import ConfigurationError, OwnerRequired

log = logging.getLogger(__name__)

# Below this many dimensions one bit each is too coarse for the binary index: at 1M posts and
# 384 dims even an exact Hamming top 400 holds 0.89 of the exact top 10 (docs/performance.md,
# "The binary index at 384 dims"); the halfvec index is the one to serve there.
BINARY_MIN_DIMS = 768
# maintenance_work_mem of a build: a PostgreSQL size and nothing else (SIDECAR_INDEX_BUILD_MEM).
_BUILD_MEM = re.compile(r"[1-9][0-9]{0,9}(kB|MB|GB|TB)")


def check_build_mem(value: str) -> str:
    """``value`` when it is a PostgreSQL memory size such as ``2GB``; raises otherwise (it is
    sent to the server, and printed into the owner's script as a quoted literal)."""
    if not _BUILD_MEM.fullmatch(value):
        raise ConfigurationError(
            f"SIDECAR_INDEX_BUILD_MEM is not a PostgreSQL memory size such as 2GB: {value!r}")
    return value


def index_name(model_id: int, strategy_id: int, kind: str) -> str:
    """Name of the partial HNSW index of a (model, strategy)."""
    suffix = "bit" if kind == "binary" else "cos"
    return f"sidecar_posts_emb_{model_id}_{strategy_id}_{suffix}"


def index_statement(model_id: int, dimensions: int, strategy_id: int, kind: str = "halfvec",
                    *, m: int = 16, ef_construction: int = 128,
                    vector_schema: str = FORUM_SCHEMA) -> sql.Composed:
    """``CREATE INDEX CONCURRENTLY`` of a (model, strategy)'s partial HNSW index.

    Every name is qualified (the table, pgvector's type, function and operator class in
    ``vector_schema``, the predicate's operators): the owner's session runs it
    (:mod:`sidecar.db.owner_trust`), and nothing found by name may be another role's.
    """
    if kind == "binary":
        expr = sql.SQL("({ext}.binary_quantize(embeddings)::pg_catalog.bit({d}))"
                       " {ext}.bit_hamming_ops")
    else:
        expr = sql.SQL("(embeddings::{ext}.halfvec({d})) {ext}.halfvec_cosine_ops")
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table}"
        " USING hnsw ({expr}) WITH (m = {m}, ef_construction = {efc})"
        " WHERE model_id OPERATOR(pg_catalog.=) {mid}"
        " AND strategy_id OPERATOR(pg_catalog.=) {sid}"
    ).format(
        name=sql.Identifier(index_name(model_id, strategy_id, kind)),
        table=sql.Identifier(FORUM_SCHEMA, VECTOR_TABLE),
        expr=expr.format(d=sql.Literal(dimensions), ext=sql.Identifier(vector_schema)),
        m=sql.Literal(m),
        efc=sql.Literal(ef_construction),
        mid=sql.Literal(model_id),
        sid=sql.Literal(strategy_id),
    )


def vector_schema(conn: psycopg.Connection[Any]) -> str | None:
    """The schema pgvector is installed in (None: it is not)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n"
        " ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
        " WHERE e.extname OPERATOR(pg_catalog.=) 'vector'::pg_catalog.name").fetchone()
    return None if row is None else str(row[0])


def index_valid(conn: psycopg.Connection[Any], name: str) -> bool | None:
    """True when the index ``name`` of ``ai_posts_embeddings`` exists and is valid, False when
    an interrupted build left it invalid, None when there is none (an index of that name on
    another table, say one the role made in its own schema, is none)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT i.indisvalid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_index i"
        " ON i.indexrelid OPERATOR(pg_catalog.=) c.oid"
        " WHERE c.relname OPERATOR(pg_catalog.=) %s::pg_catalog.name"
        " AND i.indrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)::pg_catalog.oid",
        (name, f"{FORUM_SCHEMA}.{VECTOR_TABLE}"),
    ).fetchone()
    return None if row is None else bool(row[0])


def drop_invalid(name: str) -> sql.Composed:
    """``DROP INDEX CONCURRENTLY`` of an interrupted build's leftover on the forum's table."""
    return sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
        sql.Identifier(FORUM_SCHEMA, name))


def ensure_index(
    url: str, model: RegisteredModel, strategy_id: int, kind: str = "halfvec", *,
    m: int = 16, ef_construction: int = 128, build_mem: str = "",
) -> bool:
    """Build the partial HNSW index of a (model, strategy) if missing. Returns True if built.

    ``CREATE INDEX CONCURRENTLY`` needs its own autocommit connection and does not block writes,
    so a forum keeps posting while a large index builds. An invalid leftover from an interrupted
    build is dropped and rebuilt. ``m`` and ``ef_construction`` are HNSW's build parameters
    (``SIDECAR_HNSW_M``, ``SIDECAR_HNSW_EF_CONSTRUCTION``); an existing index keeps its own until
    it is dropped. ``build_mem`` is the build's ``maintenance_work_mem`` (empty: the server's).
    Only the table's owner, with CREATE on its schema, may build: beside a live forum the
    sidecar's role is neither (the table is discourse-ai's, or the owner's who made it in the
    forum's schema), and :class:`OwnerRequired` says what to run.
    """
    name = index_name(model.id, strategy_id, kind)
    with psycopg.connect(url, autocommit=True) as conn:
        valid = index_valid(conn, name)
        if valid:
            return False
        if not may_index_vector_table(conn):
            raise OwnerRequired(
                f"the index {name} must be built by the owner of ai_posts_embeddings "
                "(in the forum's schema): run `sidecar db upgrade --as-owner` with the owner's "
                "DATABASE_URL, or pipe `sidecar db owner-sql` into psql as the owner "
                "(docs/deployment.md); search works meanwhile, scanning without the index")
        if build_mem:
            conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                         (check_build_mem(build_mem),))
        if valid is not None:
            conn.execute(drop_invalid(name))
        if kind == "binary" and model.dimensions < BINARY_MIN_DIMS:
            log.warning("binary index for %s: %d bits per vector are too coarse to find the "
                        "nearest posts reliably; SIDECAR_INDEX_KIND=halfvec serves them better",
                        model.name, model.dimensions)
        log.info("building index %s", name)
        conn.execute(index_statement(model.id, model.dimensions, strategy_id, kind, m=m,
                                     ef_construction=ef_construction,
                                     vector_schema=vector_schema(conn) or FORUM_SCHEMA))
    return True


def may_index_vector_table(conn: psycopg.Connection[Any]) -> bool:
    """True when the connected role may index ``ai_posts_embeddings``: it acts as its owner and
    may create in its schema (PostgreSQL checks both)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT pg_has_role(c.relowner, 'USAGE')"
        " AND has_schema_privilege(c.relnamespace, 'CREATE') FROM pg_class c"
        " WHERE c.oid = to_regclass('public.ai_posts_embeddings')").fetchone()
    return bool(row and row[0])

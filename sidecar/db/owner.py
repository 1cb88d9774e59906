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
from sidecar.db.grants import (
    PUBLIC_CREATE,
    PUBLIC_CREATE_WARNING,
    SIDECAR_MODEL_IDS_FROM,
    apply_grants,
    check_role,
)
from sidecar.db.owner_trust import (
    OWNER_SEARCH_PATH,
    VECTOR_TABLE_QUALIFIED,
    owner_conninfo,
    pin_search_path,
    pinned_search_path,
    vector_table_problems,
)
from sidecar.db.pool import DictConn
from sidecar.db.schema import (
    FORUM_SCHEMA,
    LOOKUP_INDEX,
    UNIQUE_INDEX,
    VECTOR_TABLE,
    VECTOR_TABLE_DDL,
)
from sidecar.db.vector_index import (
    check_build_mem,
    drop_invalid,
    index_name,
    index_statement,
    index_valid,
    vector_schema,
)
from sidecar.errors import ConfigurationError

# The most dimensions pgvector's HNSW indexes: halfvec up to 4,000, bit up to 64,000.
MAX_DIMS = {"halfvec": 4000, "binary": 64000}
# Each (model, strategy) with vectors, walked along the table's unique key (one index probe a
# pair, never a scan of every row), and the dimensions of one of its vectors. Only the forum's
# table is read: the model registry is in the role's schema.
_PAIRS = """
WITH RECURSIVE pairs(model_id, strategy_id) AS (
    (SELECT e.model_id, e.strategy_id FROM public.ai_posts_embeddings e
     WHERE e.model_id >= %(from)s::pg_catalog.int8 ORDER BY 1, 2 LIMIT 1)
  UNION ALL
    SELECT n.model_id, n.strategy_id FROM pairs p CROSS JOIN LATERAL (
        SELECT e.model_id, e.strategy_id FROM public.ai_posts_embeddings e
        WHERE (e.model_id, e.strategy_id) > (p.model_id, p.strategy_id)
        ORDER BY 1, 2 LIMIT 1) n
)
SELECT p.model_id, p.strategy_id,
       (SELECT {ext}.vector_dims(e.embeddings) FROM public.ai_posts_embeddings e
        WHERE e.model_id = p.model_id AND e.strategy_id = p.strategy_id LIMIT 1) AS dims
FROM pairs p WHERE p.strategy_id = ANY (%(strategies)s::pg_catalog.int4[])
ORDER BY 1, 2
"""


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
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_indexes WHERE schemaname = %s"
        " AND tablename = %s AND indexdef LIKE 'CREATE UNIQUE INDEX %%'"
        " AND indexdef LIKE '%%(model_id, strategy_id, post_id)%%')",
        (FORUM_SCHEMA, VECTOR_TABLE)).fetchone()
    return bool(row and row[0])


def vector_key_missing(conn: psycopg.Connection[Any]) -> bool:
    """True when ``ai_posts_embeddings`` exists without its unique key (upserts need it)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT pg_catalog.to_regclass(%s) IS NOT NULL", (VECTOR_TABLE_QUALIFIED,)).fetchone()
    return bool(row and row[0]) and not _has_key(conn)


def _pairs(conn: psycopg.Connection[Any], ext: str, kind: str) -> list[tuple[int, int, int]]:
    """(model id, strategy, dimensions) of the sidecar's models with vectors, each an integer
    in range (they name an index and shape its statement; the role writes those rows)."""
    rows = conn.cursor(row_factory=tuple_row).execute(
        sql.SQL(_PAIRS).format(ext=sql.Identifier(ext)),
        {"from": SIDECAR_MODEL_IDS_FROM, "strategies": sorted(STRATEGY_VERSIONS)}).fetchall()
    out = []
    for model_id, strategy, dims in rows:
        if not (isinstance(dims, int) and 1 <= dims <= MAX_DIMS.get(kind, 4000)):
            raise ConfigurationError(
                f"the vectors of model {model_id} (strategy {strategy}) in "
                f"{VECTOR_TABLE_QUALIFIED} have {dims} dimensions: an HNSW index of kind {kind} "
                f"takes 1 to {MAX_DIMS.get(kind, 4000)}")
        out.append((int(model_id), int(strategy), dims))
    return out


def owner_steps(conn: DictConn, build: IndexBuild, *, role: str | None = None) -> list[str]:
    """The SQL the owner must run now, in order (none when everything is there).

    ``conn`` is the sidecar's role's (``sidecar db owner-sql``) or the owner's; ``role`` is the
    sidecar's (the connected one when None): a table made here is granted to it, and what it
    made is not trusted (:mod:`sidecar.db.owner_trust`). Read with the search path pinned.
    """
    with pinned_search_path(conn):
        found = conn.execute(
            "SELECT (SELECT extversion FROM pg_catalog.pg_extension"
            " WHERE extname = 'vector') AS vector,"
            " pg_catalog.to_regclass(%s) IS NOT NULL AS vectors, current_user AS role",
            (VECTOR_TABLE_QUALIFIED,)).fetchone()
        assert found is not None
        role = check_role(role or str(found["role"]))
        problems = vector_table_problems(conn, role)
        if problems:
            raise ConfigurationError(" ".join(problems))
        return _steps(conn, build, role, found["vector"] is not None, bool(found["vectors"]))


def _steps(conn: DictConn, build: IndexBuild, role: str, vector: bool,
           table: bool) -> list[str]:
    steps: list[str] = []
    if not vector:
        steps.append(f"CREATE EXTENSION IF NOT EXISTS vector SCHEMA {FORUM_SCHEMA}")
    if not table:
        # Where discourse-ai has not made it (the SQL of `sidecar db grants` makes it too).
        return [*steps, *VECTOR_TABLE_DDL,
                f'GRANT SELECT, INSERT, UPDATE, DELETE ON {VECTOR_TABLE_QUALIFIED} TO "{role}"']
    if not _has_key(conn):
        steps.append(f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {UNIQUE_INDEX} ON "
                     f"{VECTOR_TABLE_QUALIFIED} (model_id, strategy_id, post_id)")
    lookup = index_valid(conn, LOOKUP_INDEX)
    if lookup is not True:
        if lookup is False:
            steps.append(drop_invalid(LOOKUP_INDEX).as_string(conn))
        steps.append(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {LOOKUP_INDEX} ON "
                     f"{VECTOR_TABLE_QUALIFIED} (post_id, model_id)")
    ext = vector_schema(conn)
    if ext is None:
        return steps
    hnsw: list[str] = []
    for model_id, strategy, dims in _pairs(conn, ext, build.kind):
        name = index_name(model_id, strategy, build.kind)
        valid = index_valid(conn, name)
        if valid:
            continue
        if valid is False:
            hnsw.append(drop_invalid(name).as_string(conn))
        hnsw.append(index_statement(model_id, dims, strategy, build.kind, m=build.m,
                                    ef_construction=build.ef_construction,
                                    vector_schema=ext).as_string(conn))
    if hnsw and build.build_mem:
        hnsw.insert(0, sql.SQL("SET maintenance_work_mem = {}").format(
            sql.Literal(check_build_mem(build.build_mem))).as_string(conn))
    return steps + hnsw


def owner_script(conn: DictConn, build: IndexBuild) -> str:
    """:func:`owner_steps` as a psql script (each statement on its own: no transaction), whose
    first statement pins the owner's search path."""
    steps = owner_steps(conn, build)
    head = ["-- forum-rag-sidecar: what the owner of ai_posts_embeddings runs now",
            "-- (`sidecar db owner-sql`), e.g. psql -v ON_ERROR_STOP=1 -d discourse -f owner.sql"]
    if not steps:
        return "\n".join([*head, "-- nothing to do"]) + "\n"
    pin = ["-- first: search PostgreSQL's catalogue only (docs/deployment.md, what the owner "
           "step trusts)", f"SET search_path = {OWNER_SEARCH_PATH};"]
    return "\n".join([*head, *pin, *(f"{s};" for s in steps)]) + "\n"


def upgrade_as_owner(url: str, role: str, build: IndexBuild) -> dict[str, Any]:
    """Grant ``role`` its rights (:func:`sidecar.db.grants.apply_grants`), then run the owner's
    steps (``url``: a superuser's, or the owner's of the forum's tables), in a session that
    searches PostgreSQL's catalogue only whatever ``url`` says (:mod:`sidecar.db.owner_trust`).
    """
    role = check_role(role)
    with psycopg.connect(owner_conninfo(url), autocommit=True, row_factory=dict_row) as conn:
        pin_search_path(conn)
        try:
            apply_grants(conn, role)
        except psycopg.errors.RaiseException as exc:  # the grants' own refusal
            raise ConfigurationError(exc.diag.message_primary or str(exc)) from exc
        steps = owner_steps(conn, build, role=role)
        for step in steps:
            conn.execute(step.encode())
        warnings = [PUBLIC_CREATE_WARNING % (name, name) for name, in
                    conn.cursor(row_factory=tuple_row).execute(PUBLIC_CREATE).fetchall()]
    return {"role": role, "granted": True, "ran": steps, "warnings": warnings}

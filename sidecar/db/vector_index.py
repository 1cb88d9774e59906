"""The partial HNSW index of each (model, strategy) over ai_posts_embeddings: name and build."""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

from sidecar.db.embeddings import RegisteredModel

log = logging.getLogger(__name__)

# Below this many dimensions one bit each is too coarse for the binary index: at 1M posts and
# 384 dims even an exact Hamming top 400 holds 0.89 of the exact top 10 (docs/performance.md,
# "The binary index at 384 dims"); the halfvec index is the one to serve there.
BINARY_MIN_DIMS = 768


def index_name(model_id: int, strategy_id: int, kind: str) -> str:
    """Name of the partial HNSW index of a (model, strategy)."""
    suffix = "bit" if kind == "binary" else "cos"
    return f"sidecar_posts_emb_{model_id}_{strategy_id}_{suffix}"


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
    """
    name = index_name(model.id, strategy_id, kind)
    with psycopg.connect(url, autocommit=True) as conn:
        if build_mem:
            conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (build_mem,))
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE c.relname = %s",
            (name,),
        ).fetchone()
        if row is not None and row[0]:
            return False
        if row is not None:
            drop = sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}")
            conn.execute(drop.format(sql.Identifier(name)))
        if kind == "binary" and model.dimensions < BINARY_MIN_DIMS:
            log.warning("binary index for %s: %d bits per vector are too coarse to find the "
                        "nearest posts reliably; SIDECAR_INDEX_KIND=halfvec serves them better",
                        model.name, model.dimensions)
        if kind == "binary":
            expr = sql.SQL("(binary_quantize(embeddings)::bit({d})) bit_hamming_ops")
        else:
            expr = sql.SQL("(embeddings::halfvec({d})) halfvec_cosine_ops")
        log.info("building index %s", name)
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON ai_posts_embeddings"
                " USING hnsw ({expr}) WITH (m = {m}, ef_construction = {efc})"
                " WHERE model_id = {mid} AND strategy_id = {sid}"
            ).format(
                name=sql.Identifier(name),
                expr=expr.format(d=sql.Literal(model.dimensions)),
                m=sql.Literal(m),
                efc=sql.Literal(ef_construction),
                mid=sql.Literal(model.id),
                sid=sql.Literal(strategy_id),
            )
        )
    return True

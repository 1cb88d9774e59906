"""ai_posts_embeddings and the model registry: registration, upserts, candidates, HNSW indexes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from pgvector import HalfVector
from psycopg import sql

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.errors import Conflict

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RegisteredModel:
    """A row of sidecar_embedding_models."""

    id: int
    name: str
    dimensions: int
    version: int


@dataclass(frozen=True, slots=True)
class EmbeddingRow:
    """One vector to store."""

    post_id: int
    digest: str
    vector: np.ndarray


def register_model(
    conn: DictConn,
    *,
    name: str,
    dimensions: int,
    version: int,
    max_length: int | None = None,
    pooling: str | None = None,
    checksum: str | None = None,
) -> RegisteredModel:
    """Register a model, or check it against the stored one.

    A model whose dimensions differ from what is stored under its name is refused: its vectors
    could not be compared with the stored ones (discourse-ai's model-switch bugs came from this).
    A higher version is recorded, which makes the backfill re-select rows of older versions.
    """
    row = conn.execute(
        "SELECT id, name, dimensions, version FROM sidecar_embedding_models WHERE name = %s"
        " FOR UPDATE",
        (name,),
    ).fetchone()
    if row is None:
        row = conn.execute(
            "INSERT INTO sidecar_embedding_models (name, dimensions, version, max_length, pooling,"
            " checksum) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name"
            " RETURNING id, name, dimensions, version",
            (name, dimensions, version, max_length, pooling, checksum),
        ).fetchone()
        assert row is not None
    if row["dimensions"] != dimensions:
        raise Conflict(
            f"model {name!r} is stored with {row['dimensions']} dimensions but the loaded model "
            f"has {dimensions}: prepare it under another name, or delete the old vectors first"
        )
    if version > row["version"] or checksum is not None:
        conn.execute(
            "UPDATE sidecar_embedding_models SET version = greatest(version, %s),"
            " checksum = coalesce(%s, checksum), updated_at = now() WHERE id = %s",
            (version, checksum, row["id"]),
        )
    return RegisteredModel(
        id=row["id"], name=name, dimensions=dimensions, version=max(version, row["version"])
    )


def find_model(conn: DictConn, name: str) -> RegisteredModel | None:
    """The registered model of that name, if any."""
    row = conn.execute(
        "SELECT id, name, dimensions, version FROM sidecar_embedding_models WHERE name = %s",
        (name,),
    ).fetchone()
    if row is None:
        return None
    return RegisteredModel(row["id"], row["name"], row["dimensions"], row["version"])


def upsert_embeddings(
    conn: DictConn,
    model: RegisteredModel,
    strategy_id: int,
    strategy_version: int,
    rows: Sequence[EmbeddingRow],
) -> int:
    """Insert or replace vectors; idempotent on (model_id, strategy_id, post_id)."""
    if not rows:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO ai_posts_embeddings (post_id, model_id, model_version, strategy_id,
                strategy_version, digest, embeddings, created_at, updated_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, now() AT TIME ZONE 'utc', now() AT TIME ZONE 'utc')
            ON CONFLICT (model_id, strategy_id, post_id) DO UPDATE SET
                model_version = EXCLUDED.model_version,
                strategy_version = EXCLUDED.strategy_version,
                digest = EXCLUDED.digest, embeddings = EXCLUDED.embeddings,
                updated_at = EXCLUDED.updated_at
            """,
            [
                (r.post_id, model.id, model.version, strategy_id, strategy_version, r.digest,
                 HalfVector(r.vector.astype(np.float32)))
                for r in rows
            ],
        )
    return len(rows)


def delete_embeddings(conn: DictConn, post_ids: Sequence[int]) -> int:
    """Remove every vector of these posts, whatever the model or strategy."""
    cur = conn.execute("DELETE FROM ai_posts_embeddings WHERE post_id = ANY(%s)", (list(post_ids),))
    return cur.rowcount


def stale_candidates(
    conn: DictConn,
    model: RegisteredModel,
    strategy_id: int,
    strategy_version: int,
    *,
    after_id: int = 0,
    limit: int = 1000,
) -> list[dict[str, object]]:
    """Public posts that may need (re-)embedding, by id from ``after_id``.

    Selected: posts with no vector for (model, strategy); vectors of an older model or strategy
    version; and posts, topics or categories touched since their vector was last checked (their
    text may have drifted; the digest decides). Each row carries the stored digest, if any.
    """
    return conn.execute(
        sql.SQL(
            """
            SELECT p.id AS post_id, e.digest
            FROM posts p {joins}
            LEFT JOIN ai_posts_embeddings e
                   ON e.post_id = p.id AND e.model_id = %(mid)s AND e.strategy_id = %(sid)s
            LEFT JOIN sidecar_embedding_checks k
                   ON k.post_id = p.id AND k.model_id = %(mid)s AND k.strategy_id = %(sid)s
            WHERE {public} AND p.id > %(after)s
              AND (e.post_id IS NULL OR e.model_version < %(mv)s OR e.strategy_version < %(sv)s
                   OR greatest(p.updated_at, t.updated_at, c.updated_at)
                      > coalesce(k.checked_at, e.updated_at))
            ORDER BY p.id
            LIMIT %(limit)s
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"mid": model.id, "sid": strategy_id, "mv": model.version, "sv": strategy_version,
         "after": after_id, "limit": limit},
    ).fetchall()


def mark_checked(
    conn: DictConn, model: RegisteredModel, strategy_id: int, post_ids: Sequence[int]
) -> None:
    """Record that these posts' text was compared with their stored digest just now."""
    if not post_ids:
        return
    conn.execute(
        """
        INSERT INTO sidecar_embedding_checks (model_id, strategy_id, post_id, checked_at)
        SELECT %s, %s, unnest(%s::bigint[]), now() AT TIME ZONE 'utc'
        ON CONFLICT (model_id, strategy_id, post_id) DO UPDATE SET checked_at = EXCLUDED.checked_at
        """,
        (model.id, strategy_id, list(post_ids)),
    )


def index_name(model_id: int, strategy_id: int, kind: str) -> str:
    """Name of the partial HNSW index of a (model, strategy)."""
    suffix = "bit" if kind == "binary" else "cos"
    return f"sidecar_posts_emb_{model_id}_{strategy_id}_{suffix}"


def ensure_index(
    url: str, model: RegisteredModel, strategy_id: int, kind: str = "halfvec"
) -> bool:
    """Build the partial HNSW index of a (model, strategy) if missing. Returns True if built.

    ``CREATE INDEX CONCURRENTLY`` needs its own autocommit connection and does not block writes,
    so a forum keeps posting while a large index builds. An invalid leftover from an interrupted
    build is dropped and rebuilt.
    """
    name = index_name(model.id, strategy_id, kind)
    with psycopg.connect(url, autocommit=True) as conn:
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
        if kind == "binary":
            expr = sql.SQL("(binary_quantize(embeddings)::bit({d})) bit_hamming_ops")
        else:
            expr = sql.SQL("(embeddings::halfvec({d})) halfvec_cosine_ops")
        log.info("building index %s", name)
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON ai_posts_embeddings"
                " USING hnsw ({expr}) WHERE model_id = {mid} AND strategy_id = {sid}"
            ).format(
                name=sql.Identifier(name),
                expr=expr.format(d=sql.Literal(model.dimensions)),
                mid=sql.Literal(model.id),
                sid=sql.Literal(strategy_id),
            )
        )
    return True


def count_embeddings(conn: DictConn, model: RegisteredModel, strategy_id: int) -> int:
    """Stored vectors of a (model, strategy)."""
    row = conn.execute(
        "SELECT count(*) AS n FROM ai_posts_embeddings WHERE model_id = %s AND strategy_id = %s",
        (model.id, strategy_id),
    ).fetchone()
    return int(row["n"]) if row else 0

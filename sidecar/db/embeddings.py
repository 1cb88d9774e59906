"""ai_posts_embeddings and the model registry: registration, upserts, candidates (the HNSW
indexes over them: :mod:`sidecar.db.vector_index`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pgvector import HalfVector
from psycopg import sql

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, category_subtree
from sidecar.db.rows import fetch_one
from sidecar.errors import Conflict, NotFound

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
    return fetch_one(conn, RegisteredModel,
                     "SELECT id, name, dimensions, version FROM sidecar_embedding_models"
                     " WHERE name = %s", (name,))


def registered_model(conn: DictConn, model_id: int) -> RegisteredModel:
    """A model of the registry by id."""
    model = fetch_one(conn, RegisteredModel,
                      "SELECT id, name, dimensions, version FROM sidecar_embedding_models"
                      " WHERE id = %s", (model_id,))
    if model is None:
        raise NotFound(f"no registered embedding model with id {model_id}")
    return model


def pairs_with_vectors(conn: DictConn, strategies: Sequence[int]) -> list[tuple[int, int]]:
    """(model id, strategy) of every registered model that has vectors of one of ``strategies``."""
    rows = conn.execute(
        """
        SELECT m.id, s.strategy FROM sidecar_embedding_models m
        CROSS JOIN unnest(%s::int[]) AS s(strategy)
        WHERE EXISTS (SELECT 1 FROM ai_posts_embeddings e
                      WHERE e.model_id = m.id AND e.strategy_id = s.strategy)
        ORDER BY m.id, s.strategy
        """,
        (list(strategies),),
    ).fetchall()
    return [(int(r["id"]), int(r["strategy"])) for r in rows]


def stored_digests(conn: DictConn, model: RegisteredModel, strategy_id: int,
                   strategy_version: int, post_ids: Sequence[int]) -> dict[int, str]:
    """Digests of ``post_ids`` stored under the current model and strategy versions (or newer).

    An older version's row is left out: it is re-embedded even when its text is the same.
    """
    rows = conn.execute(
        "SELECT post_id, digest FROM ai_posts_embeddings WHERE model_id = %s"
        " AND strategy_id = %s AND model_version >= %s AND strategy_version >= %s"
        " AND post_id = ANY(%s)",
        (model.id, strategy_id, model.version, strategy_version, list(post_ids)),
    ).fetchall()
    return {r["post_id"]: r["digest"] for r in rows}


def analyze_embeddings(conn: DictConn) -> None:
    """Fresh planner statistics of the vectors' table (after many rows changed)."""
    conn.execute("ANALYZE ai_posts_embeddings")


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
    """Remove every vector of these posts, whatever the sidecar model or strategy.

    Rows of models the sidecar did not register (discourse-ai's own, in a shared table) are
    not the sidecar's to delete.
    """
    cur = conn.execute(
        "DELETE FROM ai_posts_embeddings WHERE post_id = ANY(%s)"
        " AND model_id IN (SELECT id FROM sidecar_embedding_models)",
        (list(post_ids),),
    )
    return cur.rowcount


def delete_not_public(
    conn: DictConn,
    *,
    post_ids: Sequence[int] = (),
    topic_ids: Sequence[int] = (),
    category_ids: Sequence[int] = (),
) -> int:
    """Remove every vector of the posts in scope that are not public now (or no longer exist).

    The scope is the given posts, every post of the given topics, and every post of the topics
    in the given categories or in their subcategories at any depth (a parent turned
    read-restricted hides its whole subtree). One set-based statement, so even a large category
    is handled inside the request.
    Only rows of the sidecar's registered models are touched.
    """
    cur = conn.execute(
        sql.SQL(
            """
            WITH scope AS (
                SELECT unnest(%(posts)s::bigint[]) AS post_id
                UNION
                SELECT p.id FROM posts p WHERE p.topic_id = ANY(%(topics)s::int[])
                UNION
                SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id
                WHERE t.category_id IN {subtree}
            ), public AS (
                SELECT p.id FROM posts p {joins}
                WHERE p.id IN (SELECT post_id FROM scope) AND {public}
            )
            DELETE FROM ai_posts_embeddings e
            WHERE e.post_id IN (SELECT post_id FROM scope)
              AND e.post_id NOT IN (SELECT id FROM public)
              AND e.model_id IN (SELECT id FROM sidecar_embedding_models)
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 subtree=sql.SQL(category_subtree("SELECT unnest(%(cats)s::int[])"))),
        {"posts": list(post_ids), "topics": list(topic_ids), "cats": list(category_ids)},
    )
    return cur.rowcount


def delete_not_public_after(conn: DictConn, after_post_id: int,
                            limit: int) -> tuple[int, int | None]:
    """One batch of the sweep: of the next ``limit`` posts after ``after_post_id`` that have
    vectors of the sidecar's models, the vectors of those not public now (or gone) are deleted.

    Returns (vectors removed, the batch's last post id; None when no post is left).
    """
    row = conn.execute(
        sql.SQL(
            """
            WITH batch AS (
                SELECT DISTINCT e.post_id FROM ai_posts_embeddings e
                WHERE e.post_id > %(after)s
                  AND e.model_id IN (SELECT id FROM sidecar_embedding_models)
                ORDER BY e.post_id LIMIT %(n)s
            ), public AS (
                SELECT p.id FROM posts p {joins}
                WHERE p.id IN (SELECT post_id FROM batch) AND {public}
            ), gone AS (
                DELETE FROM ai_posts_embeddings e
                WHERE e.post_id IN (SELECT post_id FROM batch)
                  AND e.post_id NOT IN (SELECT id FROM public)
                  AND e.model_id IN (SELECT id FROM sidecar_embedding_models)
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM gone) AS removed,
                   (SELECT max(post_id) FROM batch) AS last
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"after": after_post_id, "n": limit},
    ).fetchone()
    assert row is not None
    return int(row["removed"]), (int(row["last"]) if row["last"] is not None else None)


def count_embeddings(conn: DictConn, model: RegisteredModel, strategy_id: int) -> int:
    """Stored vectors of a (model, strategy)."""
    row = conn.execute(
        "SELECT count(*) AS n FROM ai_posts_embeddings WHERE model_id = %s AND strategy_id = %s",
        (model.id, strategy_id),
    ).fetchone()
    return int(row["n"]) if row else 0


def stored_vectors(conn: DictConn, model: RegisteredModel, strategy_id: int = 1
                   ) -> list[tuple[int, np.ndarray]]:
    """(post id, vector) of every stored vector of a (model, strategy), by post id."""
    rows = conn.execute(
        "SELECT post_id, embeddings FROM ai_posts_embeddings WHERE model_id = %s"
        " AND strategy_id = %s ORDER BY post_id", (model.id, strategy_id)).fetchall()
    return [(int(r["post_id"]), r["embeddings"].to_numpy()) for r in rows]

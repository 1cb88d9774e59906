"""Reads for the retrieval pipeline: stored-vector similarities and neighbouring public posts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pgvector import HalfVector
from psycopg import sql

from sidecar.db.forum_read import PostRecord
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE


def post_similarities(
    conn: DictConn,
    *,
    model_id: int,
    strategy_id: int,
    dimensions: int,
    vector: np.ndarray,
    post_ids: Sequence[int],
) -> dict[int, float]:
    """Exact cosine similarity between ``vector`` and each post's stored embedding.

    Posts without a stored vector for this model and strategy are absent from the result.
    """
    if not post_ids:
        return {}
    rows = conn.execute(
        sql.SQL(
            """
            SELECT post_id,
                   1 - (embeddings::halfvec({dims}) <=> %(q)s::halfvec({dims})) AS similarity
            FROM ai_posts_embeddings
            WHERE model_id = %(mid)s AND strategy_id = %(sid)s AND post_id = ANY(%(ids)s)
            """
        ).format(dims=sql.Literal(dimensions)),
        {"q": HalfVector(np.asarray(vector, dtype=np.float32)), "mid": model_id,
         "sid": strategy_id, "ids": list(post_ids)},
    ).fetchall()
    return {int(r["post_id"]): float(r["similarity"]) for r in rows}


def neighbour_posts(
    conn: DictConn, anchors: Sequence[tuple[int, int]], n: int
) -> dict[tuple[int, int], list[PostRecord]]:
    """For each (topic_id, post_number) anchor, the ``n`` public posts nearest to it in its topic.

    Nearest by post number, before and after alike (ties go to the earlier post); the public
    filter applies to every neighbour, so a hidden or whispered reply is never shown.
    """
    if not anchors or n <= 0:
        return {}
    rows = conn.execute(
        sql.SQL(
            """
            SELECT x.topic_id AS anchor_topic, x.post_number AS anchor_number, nb.*
            FROM unnest(%(topics)s::int[], %(numbers)s::int[]) AS x(topic_id, post_number)
            CROSS JOIN LATERAL (
                SELECT p.id, p.topic_id, p.post_number, p.cooked, t.title,
                       coalesce(t.slug, 'topic') AS slug, c.name AS category
                FROM posts p {joins}
                WHERE p.topic_id = x.topic_id AND p.post_number <> x.post_number AND {public}
                ORDER BY abs(p.post_number - x.post_number), p.post_number
                LIMIT %(n)s
            ) nb
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"topics": [a[0] for a in anchors], "numbers": [a[1] for a in anchors], "n": n},
    ).fetchall()
    found: dict[tuple[int, int], list[PostRecord]] = {a: [] for a in anchors}
    for r in rows:
        found[(r["anchor_topic"], r["anchor_number"])].append(PostRecord(
            post_id=r["id"], topic_id=r["topic_id"], post_number=r["post_number"],
            title=r["title"], slug=r["slug"], category=r["category"] or "", cooked=r["cooked"],
        ))
    return found

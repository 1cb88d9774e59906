"""Reads for the post chooser: every public post of the ranked topics, with its features.

One query for all topics: per topic (a LATERAL subquery on ``posts.topic_id``), its public
posts most similar to the question (at most ``per_topic``; the opening post and the accepted
answers always come), with the similarity of their stored vector, likes, replies, whether the
topic's author or staff wrote them, and whether each is one of the topic's accepted answers
(discourse-solved accepts several since 2026-04: each is flagged, the rule then prefers the
accepted one that best answers the question). Optional columns and
plugin tables are detected as the rerank chain detects them (:class:`FeatureReader`): a forum
without them reads as neutral.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pgvector import HalfVector
from psycopg import sql

from sidecar.db.chain_read import FeatureReader, ForumSchema, accepted_ids_sql, optional_column
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE


@dataclass(frozen=True)
class PostRow:
    """One public post of a ranked topic, with what the chooser reads."""

    topic_id: int
    post_id: int
    post_number: int
    similarity: float | None
    accepted: bool
    by_asker: bool
    likes: int
    replies: int
    staff: bool


def _staff_sql(schema: ForumSchema) -> sql.Composable:
    if not (schema.has("users", "id") and schema.has("users", "admin")
            and schema.has("users", "moderator")):
        return sql.SQL("false")
    return sql.SQL("coalesce((SELECT u.admin OR u.moderator FROM users u"
                   " WHERE u.id = p.user_id), false)")


def posts_query(schema: ForumSchema, dimensions: int, with_vector: bool) -> sql.Composed:
    """The query for one forum schema (``with_vector``: a query vector is given)."""
    similarity = (sql.SQL("1 - (e.embeddings::halfvec({dims}) <=> %(q)s::halfvec({dims}))")
                  .format(dims=sql.Literal(dimensions)) if with_vector
                  else sql.SQL("NULL::float8"))
    return sql.SQL(
        """
        SELECT x.topic_id, f.*
        FROM unnest(%(topics)s::int[]) AS x(topic_id)
        CROSS JOIN LATERAL (SELECT {accepted} AS answers,
                                   (SELECT o.user_id FROM posts o WHERE o.topic_id = x.topic_id
                                    AND o.post_number = 1 LIMIT 1) AS asker) a
        CROSS JOIN LATERAL (
            SELECT p.id AS post_id, p.post_number, {similarity} AS similarity,
                   p.id = ANY (a.answers) AS accepted,
                   p.post_number > 1 AND p.user_id IS NOT DISTINCT FROM a.asker AS by_asker,
                   coalesce({likes}, 0) AS likes, coalesce({replies}, 0) AS replies,
                   {staff} AS staff
            FROM posts p {joins}
            LEFT JOIN ai_posts_embeddings e ON e.post_id = p.id AND e.model_id = %(mid)s
                 AND e.strategy_id = %(sid)s
            WHERE p.topic_id = x.topic_id AND {public}
            ORDER BY p.id = ANY (a.answers) DESC, p.post_number = 1 DESC,
                     similarity DESC NULLS LAST,
                     p.post_number
            LIMIT %(per_topic)s
        ) f
        """
    ).format(accepted=accepted_ids_sql(schema), similarity=similarity,
             likes=optional_column(schema, "p", "posts", "like_count", "NULL::int"),
             replies=optional_column(schema, "p", "posts", "reply_count", "NULL::int"),
             staff=_staff_sql(schema), joins=sql.SQL(PUBLIC_JOINS),
             public=sql.SQL(PUBLIC_WHERE))


class PostFeatureReader:
    """Shared by a process's searches; the forum's schema is detected once (and again later)."""

    def __init__(self, reader: FeatureReader | None = None) -> None:
        self.reader = reader or FeatureReader()

    def posts(self, conn: DictConn, topic_ids: Sequence[int], *, model_id: int,
              strategy_id: int, dimensions: int, vector: np.ndarray | None,
              per_topic: int) -> dict[int, list[PostRow]]:
        """The public posts of each topic (keyed by topic id) with their features."""
        if not topic_ids:
            return {}
        schema = self.reader.schema(conn)
        params: dict[str, object] = {"topics": list(topic_ids), "mid": model_id,
                                     "sid": strategy_id, "per_topic": per_topic}
        if vector is not None:
            params["q"] = HalfVector(np.asarray(vector, dtype=np.float32))
        rows = conn.execute(posts_query(schema, dimensions, vector is not None),
                            params).fetchall()
        out: dict[int, list[PostRow]] = {}
        for r in rows:
            out.setdefault(int(r["topic_id"]), []).append(PostRow(
                topic_id=int(r["topic_id"]), post_id=int(r["post_id"]),
                post_number=int(r["post_number"]),
                similarity=None if r["similarity"] is None else float(r["similarity"]),
                accepted=bool(r["accepted"]), by_asker=bool(r["by_asker"]),
                likes=int(r["likes"]), replies=int(r["replies"]), staff=bool(r["staff"])))
        return out

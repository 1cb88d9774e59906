"""Reads for the rerank chain: topic features and best-post vectors, one query each.

The forum database may be a real Discourse the sidecar does not own, where plugin tables and
even some columns may be absent: accepted answers live in ``discourse_solved_topic_answers``
(discourse-solved since 2026-04, several per topic), ``discourse_solved_solved_topics`` (2025),
``topic_custom_fields`` (older), or nowhere (:mod:`sidecar.db.solved`). What exists is detected
once per process (and again after
:data:`SCHEMA_TTL_S`, so a plugin installed later is seen without a restart); a missing source
reads as neutral (no accepted answer, no likes, normal priority). Only public posts are read:
a candidate whose best post is no longer public gets no features, and an accepted answer that
is not public does not count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql

from sidecar.core.chain import TopicFeatures
from sidecar.db import solved
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE

SCHEMA_TTL_S = 300.0

# (table, column) pairs whose absence makes a feature neutral.
_OPTIONAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("posts", "like_count"), ("topics", "like_count"), ("topics", "last_posted_at"),
    ("topics", "closed"), ("topics", "archived"), ("categories", "search_priority"),
    *solved.COLUMNS,
    ("posts", "reply_count"), ("users", "id"), ("users", "admin"), ("users", "moderator"),
)


@dataclass(frozen=True)
class ForumSchema:
    """Which optional feature sources this forum database has."""

    columns: frozenset[tuple[str, str]]

    def has(self, table: str, column: str) -> bool:
        """True when ``table.column`` exists (in the search path)."""
        return (table, column) in self.columns

    @property
    def solved_storage(self) -> solved.Storage | None:
        """Where this forum keeps accepted answers (the newest storage it has)."""
        return solved.storage_of(self)

    @property
    def solved_table(self) -> bool:
        """discourse-solved's own tables (the 2026 answers table, or the 2025 column)."""
        return self.solved_storage in ("answers", "column")

    @property
    def solved_custom_fields(self) -> bool:
        """Only the oldest discourse-solved storage: topic_custom_fields rows."""
        return self.solved_storage == "custom_fields"

    def sources(self) -> dict[str, bool]:
        """For the trace and health: which features this forum can give."""
        return {"accepted_answer": self.solved_storage is not None,
                "post_likes": self.has("posts", "like_count"),
                "topic_likes": self.has("topics", "like_count"),
                "search_priority": self.has("categories", "search_priority")}


def detect_schema(conn: DictConn) -> ForumSchema:
    """The optional columns present and readable, by one catalogue query (``to_regclass``
    follows the search path, as the sidecar's other queries do). A column the sidecar's role
    was not granted (``sidecar db grants``) counts as absent: its feature reads as neutral."""
    tables = sorted({t for t, _ in _OPTIONAL_COLUMNS})
    rows = conn.execute(
        """
        SELECT x.name AS table_name, a.attname AS column_name
        FROM unnest(%s::text[]) AS x(name)
        JOIN pg_attribute a ON a.attrelid = to_regclass(x.name)
        WHERE a.attnum > 0 AND NOT a.attisdropped
          AND has_column_privilege(a.attrelid, a.attnum, 'SELECT')
        """,
        (tables,),
    ).fetchall()
    present = {(r["table_name"], r["column_name"]) for r in rows}
    return ForumSchema(frozenset(c for c in _OPTIONAL_COLUMNS if c in present))


def accepted_ids_sql(schema: ForumSchema) -> sql.Composable:
    """The topic's accepted answers that are public posts of it, newest first (an ``int[]``,
    empty without any): several where discourse-solved keeps them in its answers table."""
    return solved.accepted_ids_sql(schema)


def accepted_sql(schema: ForumSchema) -> sql.Composable:
    """The topic's newest accepted answer when it is a public post of the topic, else NULL."""
    return sql.SQL("({})[1]").format(solved.accepted_ids_sql(schema))


def optional_column(schema: ForumSchema, alias: str, table: str, column: str,
                    default: str) -> sql.Composable:
    """``alias.column`` when the forum has it, else ``default`` (SQL)."""
    if schema.has(table, column):
        return sql.SQL("{}.{}").format(sql.Identifier(alias), sql.Identifier(column))
    return sql.SQL(default)


def features_query(schema: ForumSchema) -> sql.Composed:
    """One query: features of each (topic, best post) pair whose post is public.

    Each pair is looked up by primary keys in a LATERAL subquery (its LIMIT keeps the planner
    from flattening it): a hash join of the candidates with every topic would scan the whole
    topics table, which is the large one on a real forum.
    """
    return sql.SQL(
        """
        SELECT x.topic_id, f.*
        FROM unnest(%(topics)s::int[], %(posts)s::int[]) AS x(topic_id, post_id)
        CROSS JOIN LATERAL (
            SELECT {accepted} AS accepted_answer_post_ids,
                   coalesce({topic_likes}, 0) AS topic_like_count,
                   coalesce({post_likes}, 0) AS post_like_count,
                   t.created_at, {last_posted_at} AS last_posted_at,
                   p.created_at AS post_created_at,
                   coalesce({priority}, 0) AS search_priority,
                   coalesce({closed}, false) AS closed, coalesce({archived}, false) AS archived
            FROM posts p {joins}
            WHERE p.id = x.post_id AND p.topic_id = x.topic_id AND {public}
            LIMIT 1
        ) f
        """
    ).format(
        accepted=accepted_ids_sql(schema),
        topic_likes=optional_column(schema, "t", "topics", "like_count", "NULL::int"),
        post_likes=optional_column(schema, "p", "posts", "like_count", "NULL::int"),
        last_posted_at=optional_column(schema, "t", "topics", "last_posted_at",
                                       "NULL::timestamp"),
        priority=optional_column(schema, "c", "categories", "search_priority", "NULL::int"),
        closed=optional_column(schema, "t", "topics", "closed", "NULL::boolean"),
        archived=optional_column(schema, "t", "topics", "archived", "NULL::boolean"),
        joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
    )


class FeatureReader:
    """Loads :class:`TopicFeatures`; knows the forum's schema (detected lazily, cached)."""

    def __init__(self, ttl_s: float = SCHEMA_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._schema: ForumSchema | None = None
        self._query: sql.Composed | None = None
        self._detected_at = 0.0

    def schema(self, conn: DictConn) -> ForumSchema:
        """The detected schema, re-detected when older than the TTL."""
        with self._lock:
            if self._schema is None or time.monotonic() - self._detected_at > self.ttl_s:
                self._schema = detect_schema(conn)
                self._query = features_query(self._schema)
                self._detected_at = time.monotonic()
            return self._schema

    def features(self, conn: DictConn, pairs: Sequence[tuple[int, int]]
                 ) -> dict[int, TopicFeatures]:
        """Features keyed by topic id, for (topic id, best post id) pairs; absent when the
        post is not public (anymore)."""
        self.schema(conn)
        if not pairs:
            return {}
        assert self._query is not None
        rows = conn.execute(self._query, {"topics": [p[0] for p in pairs],
                                          "posts": [p[1] for p in pairs]}).fetchall()
        return {r["topic_id"]: _features(r) for r in rows}


def _features(r: dict[str, Any]) -> TopicFeatures:
    accepted = tuple(int(a) for a in r["accepted_answer_post_ids"] or ())
    return TopicFeatures(
        topic_id=r["topic_id"], accepted_answer_post_id=accepted[0] if accepted else None,
        accepted_answer_post_ids=accepted,
        topic_like_count=int(r["topic_like_count"]), post_like_count=int(r["post_like_count"]),
        created_at=r["created_at"], last_posted_at=r["last_posted_at"],
        post_created_at=r["post_created_at"], search_priority=int(r["search_priority"]),
        closed=bool(r["closed"]), archived=bool(r["archived"]),
    )


def post_vectors(
    conn: DictConn, *, model_id: int, strategy_id: int, dimensions: int,
    post_ids: Sequence[int],
) -> dict[int, np.ndarray]:
    """Stored vectors (float32) of the public posts among ``post_ids``, keyed by post id.

    Fetched in binary, so 300 vectors of 1,024 dimensions do not go through text parsing.
    """
    if not post_ids:
        return {}
    cur = conn.cursor(binary=True)
    rows = cur.execute(
        sql.SQL(
            """
            SELECT e.post_id::int AS post_id, e.embeddings::halfvec({dims}) AS v
            FROM ai_posts_embeddings e
            JOIN posts p ON p.id = e.post_id {joins}
            WHERE e.model_id = %(mid)s AND e.strategy_id = %(sid)s
              AND e.post_id = ANY(%(ids)s::bigint[]) AND {public}
            """
        ).format(dims=sql.Literal(dimensions), joins=sql.SQL(PUBLIC_JOINS),
                 public=sql.SQL(PUBLIC_WHERE)),
        {"mid": model_id, "sid": strategy_id, "ids": list(post_ids)},
    ).fetchall()
    return {int(r["post_id"]): r["v"].to_numpy().astype(np.float32) for r in rows}

"""Reads for related topics (``/v1/topics/<id>/related``) and its cache, public posts only.

A topic is *public* here when at least one of its posts is (the rule of :mod:`sidecar.db.public`
covers the topic and its category through the post): a private message, a topic in a
read-restricted category, an unlisted or deleted topic, and a topic whose every post is
hidden or deleted all read as absent, exactly like a topic id that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from psycopg import sql

from sidecar.db.forum_read import PostRecord
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE


@dataclass(frozen=True, slots=True)
class SourceTopic:
    """A public topic whose related topics are asked: its title and first public post."""

    topic_id: int
    title: str
    slug: str
    created_at: datetime
    post_id: int  # its first public post
    cooked: str


@dataclass(frozen=True, slots=True)
class Card:
    """A public post to show for a related topic, with its topic's status."""

    post: PostRecord
    closed: bool
    archived: bool


def public_topic(conn: DictConn, topic_id: int) -> SourceTopic | None:
    """The topic when it is public (see the module), else None, whatever the reason."""
    row = conn.execute(
        sql.SQL(
            """
            SELECT t.id AS topic_id, t.title, coalesce(t.slug, 'topic') AS slug, t.created_at,
                   p.id AS post_id, p.cooked
            FROM posts p {joins}
            WHERE p.topic_id = %(topic)s AND {public}
            ORDER BY p.post_number LIMIT 1
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"topic": topic_id},
    ).fetchone()
    if row is None:
        return None
    return SourceTopic(topic_id=int(row["topic_id"]), title=str(row["title"]),
                       slug=str(row["slug"]), created_at=row["created_at"],
                       post_id=int(row["post_id"]), cooked=str(row["cooked"] or ""))


def topic_vector(conn: DictConn, *, model_id: int, strategy_id: int, dimensions: int,
                 topic_id: int) -> tuple[int, np.ndarray] | None:
    """(post id, vector) of the topic's first public post that has a stored vector of
    (model, strategy): the topic's vector. None when no public post of it has one yet."""
    cur = conn.cursor(binary=True)
    row = cur.execute(
        sql.SQL(
            """
            SELECT p.id::int AS post_id, e.embeddings::halfvec({dims}) AS v
            FROM posts p
            JOIN ai_posts_embeddings e ON e.post_id = p.id AND e.model_id = %(mid)s
                 AND e.strategy_id = %(sid)s {joins}
            WHERE p.topic_id = %(topic)s AND {public}
            ORDER BY p.post_number LIMIT 1
            """
        ).format(dims=sql.Literal(dimensions), joins=sql.SQL(PUBLIC_JOINS),
                 public=sql.SQL(PUBLIC_WHERE)),
        {"mid": model_id, "sid": strategy_id, "topic": topic_id},
    ).fetchone()
    if row is None:
        return None
    return int(row["post_id"]), row["v"].to_numpy().astype(np.float32)


def topic_and_cards(conn: DictConn, topic_id: int, post_ids: Sequence[int]
                    ) -> tuple[SourceTopic | None, dict[int, Card]]:
    """:func:`public_topic` and :func:`public_cards` in one round trip (a cached list's
    request): the cards only when the topic is public."""
    rows = conn.execute(
        sql.SQL(
            """
            (SELECT true AS source, {columns}, t.created_at
             FROM posts p {joins} WHERE p.topic_id = %(topic)s AND {public}
             ORDER BY p.post_number LIMIT 1)
            UNION ALL
            (SELECT false, {columns}, NULL
             FROM posts p {joins} WHERE p.id = ANY(%(ids)s) AND {public})
            """
        ).format(columns=_CARD_COLUMNS, joins=sql.SQL(PUBLIC_JOINS),
                 public=sql.SQL(PUBLIC_WHERE)),
        {"topic": topic_id, "ids": list(post_ids)},
    ).fetchall()
    found = next((r for r in rows if r["source"]), None)
    if found is None:
        return None, {}
    source = SourceTopic(topic_id=int(found["topic_id"]), title=str(found["title"]),
                         slug=str(found["slug"]), created_at=found["created_at"],
                         post_id=int(found["id"]), cooked=str(found["cooked"] or ""))
    return source, {int(r["id"]): _card(r) for r in rows if not r["source"]}


_CARD_COLUMNS = sql.SQL(
    "p.id, p.topic_id, p.post_number, p.cooked, t.title, coalesce(t.slug, 'topic') AS slug,"
    " c.name AS category, t.closed, t.archived")


def _card(r: dict[str, Any]) -> Card:
    return Card(post=PostRecord(post_id=r["id"], topic_id=r["topic_id"],
                                post_number=r["post_number"], title=r["title"], slug=r["slug"],
                                category=r["category"] or "", cooked=r["cooked"]),
                closed=bool(r["closed"]), archived=bool(r["archived"]))


def public_cards(conn: DictConn, post_ids: Sequence[int]) -> dict[int, Card]:
    """The public posts among ``post_ids`` with what a result shows, and their topic's
    ``closed`` and ``archived`` flags (read now: the cache never decides what is shown)."""
    if not post_ids:
        return {}
    rows = conn.execute(
        sql.SQL("SELECT {columns} FROM posts p {joins} WHERE p.id = ANY(%s) AND {public}")
        .format(columns=_CARD_COLUMNS, joins=sql.SQL(PUBLIC_JOINS),
                public=sql.SQL(PUBLIC_WHERE)),
        (list(post_ids),),
    ).fetchall()
    return {int(r["id"]): _card(r) for r in rows}


def topics_of_posts(conn: DictConn, post_ids: Sequence[int]) -> list[int]:
    """The topics these posts belong to, public or not (only to drop cached related lists:
    nothing read here is shown)."""
    if not post_ids:
        return []
    rows = conn.execute("SELECT DISTINCT topic_id FROM posts WHERE id = ANY(%s)",
                        (list(post_ids),)).fetchall()
    return sorted(int(r["topic_id"]) for r in rows)

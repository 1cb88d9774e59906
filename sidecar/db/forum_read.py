"""Reads from the forum tables (real or owned): post texts for embedding, results for display."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from sidecar.core.strategy import PostSource
from sidecar.core.text import html_to_text
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, post_is_public


@dataclass(frozen=True, slots=True)
class PostRecord:
    """A public post with what a result needs to show it and link to it."""

    post_id: int
    topic_id: int
    post_number: int
    title: str
    slug: str
    category: str
    cooked: str


def post_sources(conn: DictConn, post_ids: Sequence[int]) -> list[PostSource]:
    """Build the embedding inputs of public posts (non-public ids are silently absent).

    The opening post and the post replied to are included (as plain text) when they are public
    themselves, for the enriched strategy: same topic as ``p``, so the post-level part of the
    public rule is all they need.
    """
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.id, p.topic_id, p.post_number, p.cooked, t.title, c.name AS category,
                   coalesce((SELECT array_agg(g.name ORDER BY g.name) FROM topic_tags tt
                             JOIN tags g ON g.id = tt.tag_id WHERE tt.topic_id = t.id),
                            '{{}}') AS tags,
                   op.cooked AS opening_cooked, par.cooked AS parent_cooked
            FROM posts p {joins}
            LEFT JOIN posts op ON op.topic_id = p.topic_id AND op.post_number = 1
                 AND p.post_number > 1 AND {op_public}
            LEFT JOIN posts par ON par.topic_id = p.topic_id
                 AND par.post_number = p.reply_to_post_number AND {par_public}
            WHERE p.id = ANY(%s) AND {public}
            ORDER BY p.id
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 op_public=sql.SQL(post_is_public("op")),
                 par_public=sql.SQL(post_is_public("par"))),
        (list(post_ids),),
    ).fetchall()
    return [
        PostSource(
            post_id=r["id"],
            topic_id=r["topic_id"],
            post_number=r["post_number"],
            title=r["title"],
            category=r["category"] or "",
            tags=tuple(r["tags"]),
            text=html_to_text(r["cooked"]),
            opening_text=html_to_text(r["opening_cooked"]) if r["opening_cooked"] else None,
            parent_text=html_to_text(r["parent_cooked"]) if r["parent_cooked"] else None,
        )
        for r in rows
    ]


def public_posts(conn: DictConn, post_ids: Sequence[int]) -> dict[int, PostRecord]:
    """The public posts among ``post_ids``, keyed by id, with topic and category for display.

    Results are hydrated through this function, which applies the public filter once more: a post
    hidden or deleted between the search and now is dropped, not shown.
    """
    if not post_ids:
        return {}
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.id, p.topic_id, p.post_number, p.cooked, t.title,
                   coalesce(t.slug, 'topic') AS slug, c.name AS category
            FROM posts p {joins}
            WHERE p.id = ANY(%s) AND {public}
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        (list(post_ids),),
    ).fetchall()
    return {
        r["id"]: PostRecord(
            post_id=r["id"], topic_id=r["topic_id"], post_number=r["post_number"],
            title=r["title"], slug=r["slug"], category=r["category"] or "", cooked=r["cooked"],
        )
        for r in rows
    }


def forum_counts(conn: DictConn) -> dict[str, int]:
    """Topic and post counts, total and public (for health and the CLI)."""
    row = conn.execute(
        sql.SQL(
            """
            SELECT (SELECT count(*) FROM topics) AS topics, (SELECT count(*) FROM posts) AS posts,
                   (SELECT count(*) FROM posts p {joins} WHERE {public}) AS public_posts
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))
    ).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}

"""Reads from the forum tables (real or owned): post texts for embedding, results for display."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from sidecar.core.strategy import PostSource
from sidecar.core.text import html_to_text
from sidecar.db.pool import DictConn
from sidecar.db.public import (
    PUBLIC_JOINS,
    PUBLIC_TAG,
    PUBLIC_WHERE,
    RESTRICTED_CATEGORIES,
    post_is_public,
)
from sidecar.db.rows import fetch_one


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
    public rule is all they need. Only the tags anyone may see are included (``PUBLIC_TAG``: a
    staff-only tag's name is never embedded).
    """
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.id, p.topic_id, p.post_number, p.cooked, t.title, c.name AS category,
                   coalesce((SELECT array_agg(g.name ORDER BY g.name) FROM topic_tags tt
                             JOIN tags g ON g.id = tt.tag_id
                             WHERE tt.topic_id = t.id AND {public_tag}),
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
                 public_tag=sql.SQL(PUBLIC_TAG), op_public=sql.SQL(post_is_public("op")),
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


def public_topic_count(conn: DictConn) -> int:
    """How many topics have at least one public post."""
    row = conn.execute(
        sql.SQL("SELECT count(DISTINCT p.topic_id) AS n FROM posts p {joins} WHERE {public}")
        .format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))
    ).fetchone()
    return int(row["n"]) if row else 0


def existing_ids(conn: psycopg.Connection[Any], table: LiteralString) -> set[int]:
    """Every id of a forum table (``categories``, ``topics``...)."""
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT id FROM {}").format(sql.Identifier(table)))
        return {int(r[0]) for r in cur.fetchall()}


@dataclass
class Visibility:
    """Loaded posts as the sidecar will treat them (``sidecar.db.public``)."""

    public: int = 0
    not_public: int = 0
    in_restricted_categories: int = 0  # a restricted category or any of its ancestors


def visibility(conn: psycopg.Connection[Any], post_ids: list[int]) -> Visibility:
    """How many of these posts are public, and how many sit under a restricted category."""
    found = fetch_one(
        conn, Visibility,
        sql.SQL(
            """
            SELECT count(*) FILTER (WHERE public.id IS NOT NULL) AS public,
                   count(*) FILTER (WHERE public.id IS NULL) AS not_public,
                   count(*) FILTER (WHERE t.category_id IN {restricted})
                       AS in_restricted_categories
            FROM posts p JOIN topics t ON t.id = p.topic_id
            LEFT JOIN (SELECT p.id FROM posts p {joins} WHERE p.id = ANY(%(ids)s) AND {public}
                      ) public ON public.id = p.id
            WHERE p.id = ANY(%(ids)s)
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 restricted=sql.SQL(RESTRICTED_CATEGORIES)),
        {"ids": post_ids},
    )
    assert found is not None
    return found

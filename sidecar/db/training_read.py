"""Reads for training the forum's reranker: its public threads, each a question with replies.

Only public posts leave this module (the public filter of :mod:`sidecar.db.public`), so a
reranker trained from them has never read a private message, a restricted category, a hidden,
deleted or whisper post.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import cast

from psycopg import sql

from sidecar.core.evidence import plain_text
from sidecar.db.chain_read import FeatureReader, accepted_ids_sql
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, post_is_public


@dataclass(frozen=True, slots=True)
class ThreadPost:
    """A public post of a thread, as plain text."""

    post_id: int
    post_number: int
    user_id: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Thread:
    """A public topic: its title, its opening post and its public replies in order."""

    topic_id: int
    title: str
    opening: ThreadPost
    replies: tuple[ThreadPost, ...]
    accepted: int | None  # the newest accepted answer's post id (discourse-solved), when public
    # Every public accepted answer, newest first (several since discourse-solved 2026-04).
    accepted_all: tuple[int, ...] = ()


# A thread: a public opening post (``p``) with at least one public reply.
_THREAD = sql.SQL(
    "p.post_number = 1 AND {public} AND EXISTS (SELECT 1 FROM posts r WHERE"
    " r.topic_id = p.topic_id AND r.post_number > 1 AND {reply_public})"
).format(public=sql.SQL(PUBLIC_WHERE), reply_public=sql.SQL(post_is_public("r")))


def thread_count(conn: DictConn) -> int:
    """Public topics whose opening post and at least one reply are public."""
    row = conn.execute(sql.SQL("SELECT count(*) AS n FROM posts p {joins} WHERE {thread}")
                       .format(joins=sql.SQL(PUBLIC_JOINS), thread=_THREAD)).fetchone()
    return int(row["n"]) if row else 0


def training_threads(conn: DictConn, *, limit: int, seed: str,
                     exclude: Collection[int] = (), only: Collection[int] | None = None,
                     reader: FeatureReader | None = None, max_replies: int = 12
                     ) -> list[Thread]:
    """Up to ``limit`` public threads with at least one public reply, drawn by a hash of their
    id and ``seed`` (among ``only`` when given), without the topics in ``exclude``; each with up
    to ``max_replies`` public replies in post order."""
    schema = (reader or FeatureReader()).schema(conn)
    rows = conn.execute(
        sql.SQL(
            """
            WITH x AS (
                SELECT p.topic_id, t.title FROM posts p {joins}
                WHERE {thread} AND p.topic_id <> ALL (%(exclude)s::int[])
                  AND (%(only)s::int[] IS NULL OR p.topic_id = ANY (%(only)s::int[]))
                ORDER BY md5(p.topic_id::text || ':' || %(seed)s), p.topic_id
                LIMIT %(limit)s
            )
            SELECT x.topic_id, x.title, {accepted} AS accepted,
                   q.id, q.post_number, q.user_id, q.cooked
            FROM x CROSS JOIN LATERAL (
                SELECT p.id, p.post_number, p.user_id, p.cooked FROM posts p {joins}
                WHERE p.topic_id = x.topic_id AND {public}
                ORDER BY p.post_number LIMIT %(per_topic)s
            ) q
            ORDER BY x.topic_id, q.post_number
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE), thread=_THREAD,
                 accepted=accepted_ids_sql(schema)),
        {"exclude": sorted(exclude), "seed": seed, "limit": limit,
         "only": None if only is None else sorted(only),
         "per_topic": max_replies + 1},
    ).fetchall()
    return _threads(rows)


def _threads(rows: list[dict[str, object]]) -> list[Thread]:
    by_topic: dict[int, list[dict[str, object]]] = {}
    for r in rows:
        by_topic.setdefault(int(str(r["topic_id"])), []).append(r)
    out = []
    for topic_id, posts in by_topic.items():
        first = posts[0]
        items = [ThreadPost(post_id=int(str(p["id"])), post_number=int(str(p["post_number"])),
                            user_id=None if p["user_id"] is None else int(str(p["user_id"])),
                            text=plain_text(str(p["cooked"] or ""))) for p in posts]
        if items[0].post_number != 1 or len(items) < 2:
            continue
        accepted = tuple(int(a) for a in cast("list[int] | None", first["accepted"]) or ())
        out.append(Thread(topic_id=topic_id, title=str(first["title"]), opening=items[0],
                          replies=tuple(items[1:]), accepted=accepted[0] if accepted else None,
                          accepted_all=accepted))
    return out


def reply_links(conn: DictConn, topic_ids: Collection[int]) -> list[tuple[int, str]]:
    """(topic id, link destination) of every ``href`` in the public replies of ``topic_ids``
    (the caller keeps those that lead to a topic of the forum: ``core.forum_links``)."""
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.topic_id, m[1] AS href
            FROM posts p {joins}
            CROSS JOIN LATERAL regexp_matches(p.cooked, 'href="([^"]+)"', 'g') AS m
            WHERE p.topic_id = ANY (%(topics)s::int[]) AND p.post_number > 1 AND {public}
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"topics": sorted(topic_ids)},
    ).fetchall()
    return [(int(r["topic_id"]), str(r["href"])) for r in rows]


def opening_posts(conn: DictConn, topic_ids: Collection[int]) -> dict[int, int]:
    """The opening post's id of each public topic among ``topic_ids`` (others are absent)."""
    rows = conn.execute(
        sql.SQL("SELECT p.topic_id, p.id FROM posts p {joins}"
                " WHERE p.topic_id = ANY (%(topics)s::int[]) AND p.post_number = 1 AND {public}")
        .format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"topics": sorted(topic_ids)},
    ).fetchall()
    return {int(r["topic_id"]): int(r["id"]) for r in rows}

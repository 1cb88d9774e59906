"""Reads for the zone calibration: a sample of the forum's own questions (opening posts)."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from sidecar.core.text import html_to_text
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, post_is_public


@dataclass(frozen=True, slots=True)
class OpeningPost:
    """A public topic's question: its title and its opening post as plain text."""

    topic_id: int
    title: str
    text: str


def opening_posts(conn: DictConn, n: int, seed: int) -> list[OpeningPost]:
    """Up to ``n`` public topics that have a public reply, drawn by a hash of their id and
    ``seed`` (the same sample for the same forum and seed), with their opening posts."""
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.topic_id, t.title, p.cooked
            FROM posts p {joins}
            WHERE p.post_number = 1 AND {public}
              AND EXISTS (SELECT 1 FROM posts r WHERE r.topic_id = p.topic_id
                          AND r.post_number > 1 AND {reply_public})
            ORDER BY md5(p.topic_id::text || ':' || %(seed)s::text), p.topic_id
            LIMIT %(n)s
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 reply_public=sql.SQL(post_is_public("r"))),
        {"n": n, "seed": seed},
    ).fetchall()
    return [OpeningPost(topic_id=int(r["topic_id"]), title=str(r["title"]),
                        text=html_to_text(r["cooked"] or "", drop_quotes=True))
            for r in rows]

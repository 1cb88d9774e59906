"""Reads for the zone calibration: the forum's own questions (opening posts), and those its
members asked (stored retrievals)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from psycopg import sql

from sidecar.core.text import html_to_text
from sidecar.core.zone_guard import MemberQuestion
from sidecar.db import solved
from sidecar.db.chain_read import detect_schema
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, post_is_public


@dataclass(frozen=True, slots=True)
class OpeningPost:
    """A public topic's question: its title and its opening post as plain text."""

    topic_id: int
    title: str
    text: str


def opening_posts(conn: DictConn, n: int, seed: int, among: Collection[int] | None = None
                  ) -> list[OpeningPost]:
    """Up to ``n`` public topics that have a public reply (only those in ``among`` when given),
    drawn by a hash of their id and ``seed`` (the same sample for the same forum and seed), with
    their opening posts."""
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.topic_id, t.title, p.cooked
            FROM posts p {joins}
            WHERE p.post_number = 1 AND {public}
              AND EXISTS (SELECT 1 FROM posts r WHERE r.topic_id = p.topic_id
                          AND r.post_number > 1 AND {reply_public})
              AND (%(among)s::int[] IS NULL OR p.topic_id = ANY (%(among)s::int[]))
            ORDER BY md5(p.topic_id::text || ':' || %(seed)s::text), p.topic_id
            LIMIT %(n)s
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 reply_public=sql.SQL(post_is_public("r"))),
        {"n": n, "seed": seed, "among": None if among is None else sorted(among)},
    ).fetchall()
    return [OpeningPost(topic_id=int(r["topic_id"]), title=str(r["title"]),
                        text=html_to_text(r["cooked"] or "", drop_quotes=True))
            for r in rows]


def accepted_answers(conn: DictConn, n: int) -> list[tuple[OpeningPost, tuple[int, ...]]]:
    """Up to ``n`` public topics with an accepted answer (Discourse Solved) that is a public
    reply, newest topics first: the topic's question and its accepted answers' post ids (newest
    first; several where discourse-solved keeps them in its answers table). None on a forum
    without discourse-solved: where it keeps them is read from the catalogue
    (:mod:`sidecar.db.solved`), never by naming a column that may be gone."""
    schema = detect_schema(conn)
    if schema.solved_storage is None:
        return []
    rows = conn.execute(
        sql.SQL(
            """
            SELECT * FROM (
                SELECT p.topic_id, t.title, p.cooked, {answers} AS answers
                FROM ({solved_topics}) x
                JOIN posts p ON p.topic_id = x.topic_id AND p.post_number = 1 {joins}
                WHERE {public}
            ) found
            WHERE cardinality(answers) > 0
            ORDER BY topic_id DESC LIMIT %(n)s
            """
        ).format(answers=solved.accepted_ids_sql(schema, replies_only=True),
                 solved_topics=solved.solved_topics_sql(schema), joins=sql.SQL(PUBLIC_JOINS),
                 public=sql.SQL(PUBLIC_WHERE)),
        {"n": n},
    ).fetchall()
    return [(OpeningPost(topic_id=int(r["topic_id"]), title=str(r["title"]),
                         text=html_to_text(r["cooked"] or "", drop_quotes=True)),
             tuple(int(a) for a in r["answers"])) for r in rows]


def asked_questions(conn: DictConn, n: int, days: int) -> list[MemberQuestion]:
    """Up to ``n`` questions the forum's members asked in the last ``days`` days (the
    standalone queries of stored retrievals; the input gate's refusals left out), each with its
    asker, the most recently asked first."""
    rows = conn.execute(
        "SELECT query, asker, created_at FROM sidecar_retrievals"
        " WHERE query <> '' AND gate_reason IS NULL"
        " AND created_at >= now() - make_interval(days => %(days)s)"
        " ORDER BY created_at DESC, id LIMIT %(n)s",
        {"n": n, "days": days},
    ).fetchall()
    return [MemberQuestion(text=str(r["query"]), asker=r["asker"], asked_at=r["created_at"])
            for r in rows]

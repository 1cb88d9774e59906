"""Judgements a forum already holds: moderator labels and Discourse's search log.

Only public topics are ever judgements: a label or a click on a topic that is private, deleted or
unlisted now is dropped. From ``search_logs`` only ``term``, ``search_result_id`` and
``search_result_type`` are read (the table also holds user ids and IP addresses, which never
leave the forum's database).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE

# search_logs.search_result_type of a topic (Discourse's SearchLog.search_result_types).
TOPIC_RESULT = 1

# A topic counts as public when at least one of its posts is.
_PUBLIC_TOPICS = sql.SQL(
    "SELECT DISTINCT p.topic_id FROM posts p {joins} WHERE {public} AND p.topic_id = ANY(%s)"
).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))


@dataclass(frozen=True, slots=True)
class LabelRow:
    """A retrieval a moderator said ``topic_id`` answers (should have answered, or wrong
    evidence with the right topic named)."""

    retrieval_id: str
    query: str
    topic_id: int


@dataclass(frozen=True, slots=True)
class ClickRow:
    """Members who searched ``term`` (lower-cased, trimmed) and opened ``topic_id``."""

    term: str
    topic_id: int
    clicks: int


def public_topic_ids(conn: DictConn, topic_ids: list[int]) -> set[int]:
    """The subset of ``topic_ids`` that are public now."""
    if not topic_ids:
        return set()
    return {r["topic_id"] for r in conn.execute(_PUBLIC_TOPICS, (topic_ids,)).fetchall()}


def label_judgements(conn: DictConn) -> list[LabelRow]:
    """Labels "should have answered" that name the right topic, oldest first."""
    rows = conn.execute(
        """
        SELECT r.id::text AS retrieval_id, r.query, l.right_topic_id AS topic_id
        FROM sidecar_retrieval_labels l JOIN sidecar_retrievals r ON r.id = l.retrieval_id
        WHERE l.label IN ('should_have_answered', 'wrong_evidence')
          AND l.right_topic_id IS NOT NULL
          AND r.query <> ''
        ORDER BY r.created_at, r.id
        """
    ).fetchall()
    public = public_topic_ids(conn, sorted({r["topic_id"] for r in rows}))
    return [LabelRow(r["retrieval_id"], r["query"], r["topic_id"])
            for r in rows if r["topic_id"] in public]


def has_search_log(conn: DictConn) -> bool:
    """True when the database has Discourse's ``search_logs`` table."""
    # Present and readable: the sidecar's role may not have been granted it.
    row = conn.execute(
        "SELECT CASE WHEN to_regclass('search_logs') IS NULL THEN false"
        " ELSE has_column_privilege('search_logs', 'term', 'SELECT') END AS present").fetchone()
    return bool(row and row["present"])


def click_judgements(conn: DictConn) -> list[ClickRow]:
    """Clicked topics per search term (public topics only), most clicked first."""
    if not has_search_log(conn):
        return []
    rows = conn.execute(
        """
        SELECT lower(btrim(term)) AS term, search_result_id AS topic_id, count(*)::int AS clicks
        FROM search_logs
        WHERE search_result_type = %s AND search_result_id IS NOT NULL AND btrim(term) <> ''
        GROUP BY 1, 2
        ORDER BY 1, 3 DESC, 2
        """,
        (TOPIC_RESULT,),
    ).fetchall()
    public = public_topic_ids(conn, sorted({r["topic_id"] for r in rows}))
    return [ClickRow(r["term"], r["topic_id"], r["clicks"]) for r in rows
            if r["topic_id"] in public]

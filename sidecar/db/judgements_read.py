"""Judgements a forum already holds: moderator labels and Discourse's search log.

Only public topics are ever judgements: a label or a click on a topic that is private, deleted,
unlisted or a shared draft now is dropped.

A search-log click is what a member's browser says it clicked (Discourse's ``POST /search/click``
takes the result from the client), so one account or one visitor could attach any public topic
to any text. A (term, topic) pair is therefore a judgement only when at least ``min_members``
distinct members clicked it: signed-in members by user id, staff, Discourse's system users
(ids <= 0) and crawlers left out. Logged-out visitors together count as **one** member at most,
whatever their addresses: networks are cheap (three servers in three /24s are one person), and
a signed-in member's id is the only thing one person cannot multiply at will. The counting
happens in SQL: no user id or address ever leaves the forum's database; only ``term``, the
clicked topic and the number of members do.

Discourse logs the clicked result's id: the full-page search (``search_type`` 2) logs a topic's
id, the header search menu (``search_type`` 1) a post's id, which is mapped to its topic through
``posts`` (public posts only).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE

# search_logs.search_result_type of a topic (Discourse's SearchLog.search_result_types).
TOPIC_RESULT = 1
# search_logs.search_type (Discourse's SearchLog.search_types): which id a click carries.
HEADER_SEARCH = 1  # the header search menu: a post id
FULL_PAGE_SEARCH = 2  # the full-page search: a topic id
# Distinct members a (term, topic) pair needs before it counts as judged (the floor of
# SIDECAR_CLICK_MIN_MEMBERS): fewer can be one person with a second account.
MIN_MEMBERS = 3
# The columns a click judgement reads; the log is used only where every one is readable.
_LOG_COLUMNS = ("term", "user_id", "search_result_id", "search_type", "search_result_type")
# Newer Discourse marks crawlers' rows; older forums lack the columns.
_CRAWLER_COLUMNS = ("crawler", "likely_crawler")

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
    """Members who searched ``term`` (lower-cased, trimmed) and opened ``topic_id``: how many
    distinct ones (never who)."""

    term: str
    topic_id: int
    members: int


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


def _readable_log_columns(conn: DictConn) -> set[str]:
    # By attribute number: has_column_privilege on a column name that does not exist raises.
    rows = conn.execute(
        "SELECT a.attname::text AS name FROM pg_attribute a"
        " WHERE a.attrelid = to_regclass('search_logs') AND a.attnum > 0"
        " AND NOT a.attisdropped AND has_column_privilege(a.attrelid, a.attnum, 'SELECT')"
    ).fetchall()
    return {r["name"] for r in rows}


def has_search_log(conn: DictConn) -> bool:
    """True when the database has Discourse's ``search_logs`` table and the sidecar's role may
    read every column a click judgement needs (``sidecar db grants``)."""
    return set(_LOG_COLUMNS) <= _readable_log_columns(conn)


def click_judgements(conn: DictConn, *, min_members: int = MIN_MEMBERS) -> list[ClickRow]:
    """Clicked public topics per search term that at least ``min_members`` distinct members
    opened (staff, system users and crawlers left out; logged-out visitors all one member),
    most members first."""
    columns = _readable_log_columns(conn)
    if not set(_LOG_COLUMNS) <= columns:
        return []
    crawler = sql.SQL("").join(
        sql.SQL(" AND s.{} IS NOT TRUE").format(sql.Identifier(c))
        for c in _CRAWLER_COLUMNS if c in columns)
    rows = conn.execute(
        sql.SQL(
            """
            WITH clicks AS (
                SELECT lower(btrim(s.term)) AS term,
                       CASE s.search_type
                           WHEN {full_page} THEN s.search_result_id
                           ELSE (SELECT p.topic_id FROM posts p {joins}
                                 WHERE p.id = s.search_result_id AND {public})
                       END AS topic_id,
                       -- every logged-out visitor is the same one member
                       coalesce('u' || s.user_id::text, 'anonymous') AS who
                FROM search_logs s
                WHERE s.search_result_type = {topic} AND s.search_result_id IS NOT NULL
                  AND s.search_type IN ({header}, {full_page}) AND btrim(s.term) <> ''
                  AND (s.user_id IS NULL OR (s.user_id > 0 AND NOT EXISTS (
                      SELECT 1 FROM users u WHERE u.id = s.user_id
                      AND (u.admin OR u.moderator)))){crawler}
            )
            SELECT term, topic_id, count(DISTINCT who)::int AS members
            FROM clicks WHERE topic_id IS NOT NULL
            GROUP BY 1, 2 HAVING count(DISTINCT who) >= %(min)s
            ORDER BY 1, 3 DESC, 2
            """
        ).format(full_page=sql.Literal(FULL_PAGE_SEARCH), header=sql.Literal(HEADER_SEARCH),
                 topic=sql.Literal(TOPIC_RESULT), joins=sql.SQL(PUBLIC_JOINS),
                 public=sql.SQL(PUBLIC_WHERE), crawler=crawler),
        {"min": min_members},
    ).fetchall()
    public = public_topic_ids(conn, sorted({r["topic_id"] for r in rows}))
    return [ClickRow(r["term"], r["topic_id"], r["members"]) for r in rows
            if r["topic_id"] in public]

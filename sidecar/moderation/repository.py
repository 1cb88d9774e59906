"""SQL of the moderator review: the review list, one retrieval, labels, calibration inputs."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from psycopg import sql

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.moderation.models import LabelRequest, ReviewFilters

REVIEW_ZONES = ("abstain", "cautious")

_ITEM = sql.SQL("""
    r.id, r.created_at, r.zone, r.query, r.query_source, r.gate_reason, r.scorer, r.top_score,
    r.locale, jsonb_array_length(r.evidence) AS evidence_count,
    r.evidence -> 0 ->> 'title' AS top_title,
    l.label, l.right_topic_id, l.note, l.moderator, l.labelled_at
""")
_FROM = sql.SQL(
    " FROM sidecar_retrievals r LEFT JOIN sidecar_retrieval_labels l ON l.retrieval_id = r.id"
)


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _day(d: date) -> datetime:
    return datetime.combine(d, time.min, tzinfo=UTC)


def _where(f: ReviewFilters) -> tuple[sql.Composable, list[Any]]:
    clauses: list[sql.Composable] = [sql.SQL("r.zone = ANY(%s)")]
    params: list[Any] = [[f.zone] if f.zone else list(REVIEW_ZONES)]
    if f.labelled == "yes":
        clauses.append(sql.SQL("l.retrieval_id IS NOT NULL"))
    elif f.labelled == "no":
        clauses.append(sql.SQL("l.retrieval_id IS NULL"))
    if f.label:
        clauses.append(sql.SQL("l.label = %s"))
        params.append(f.label)
    if f.scorer:
        clauses.append(sql.SQL("r.scorer = %s"))
        params.append(f.scorer)
    if f.date_from:
        clauses.append(sql.SQL("r.created_at >= %s"))
        params.append(_day(f.date_from))
    if f.date_to:
        clauses.append(sql.SQL("r.created_at < %s"))
        params.append(_day(f.date_to) + timedelta(days=1))
    if f.q:
        clauses.append(sql.SQL(
            "(r.query ILIKE %s ESCAPE '\\' OR r.conversation::text ILIKE %s ESCAPE '\\')"))
        params += [_like(f.q), _like(f.q)]
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(clauses), params


def list_review(conn: DictConn, filters: ReviewFilters) -> tuple[list[dict[str, Any]], int]:
    """One page of abstain/cautious retrievals (newest first) and the total matching."""
    where, params = _where(filters)
    total_row = conn.execute(sql.SQL("SELECT count(*) AS n") + _FROM + where, params).fetchone()
    rows = conn.execute(
        sql.SQL("SELECT ") + _ITEM + _FROM + where
        + sql.SQL(" ORDER BY r.created_at DESC, r.id DESC LIMIT %s OFFSET %s"),
        [*params, filters.per_page, (filters.page - 1) * filters.per_page],
    ).fetchall()
    return [dict(r) for r in rows], int(total_row["n"]) if total_row else 0


def get_review(conn: DictConn, retrieval_id: uuid.UUID) -> dict[str, Any] | None:
    """One retrieval with everything stored about it and its label."""
    row = conn.execute(
        sql.SQL("SELECT ") + _ITEM
        + sql.SQL(", r.conversation, r.scores, r.evidence, r.candidates, r.trace") + _FROM
        + sql.SQL(" WHERE r.id = %s"),
        (retrieval_id,),
    ).fetchone()
    return dict(row) if row else None


def review_counts(conn: DictConn) -> dict[str, int]:
    """Abstain and cautious retrievals, labelled and not (the list's header)."""
    row = conn.execute(sql.SQL(
        "SELECT count(*) FILTER (WHERE r.zone = 'abstain') AS abstain,"
        " count(*) FILTER (WHERE r.zone = 'cautious') AS cautious,"
        " count(l.retrieval_id) AS labelled, count(*) - count(l.retrieval_id) AS unlabelled"
    ) + _FROM + sql.SQL(" WHERE r.zone = ANY(%s)"), (list(REVIEW_ZONES),)).fetchone()
    return {k: int(v) for k, v in (row or {}).items()}


def review_scorers(conn: DictConn) -> list[str]:
    """Scorers that appear in the review list (for the filter)."""
    rows = conn.execute(
        "SELECT DISTINCT scorer FROM sidecar_retrievals WHERE zone = ANY(%s) ORDER BY scorer",
        (list(REVIEW_ZONES),),
    ).fetchall()
    return [r["scorer"] for r in rows]


def public_topic_titles(conn: DictConn, topic_ids: Sequence[int]) -> dict[int, str]:
    """Titles of the topics among ``topic_ids`` that have a public post right now."""
    if not topic_ids:
        return {}
    rows = conn.execute(
        sql.SQL("SELECT DISTINCT t.id, t.title FROM posts p {joins}"
                " WHERE t.id = ANY(%s) AND {public}").format(
            joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        (list(topic_ids),),
    ).fetchall()
    return {int(r["id"]): str(r["title"]) for r in rows}


def retrieval_exists(conn: DictConn, retrieval_id: uuid.UUID) -> bool:
    """True if the retrieval is stored (locked until the transaction ends)."""
    return conn.execute("SELECT 1 FROM sidecar_retrievals WHERE id = %s FOR SHARE",
                        (retrieval_id,)).fetchone() is not None


def upsert_label(conn: DictConn, retrieval_id: uuid.UUID, label: LabelRequest
                 ) -> dict[str, Any]:
    """Store (or replace) the label of a retrieval."""
    row = conn.execute(
        """
        INSERT INTO sidecar_retrieval_labels
            (retrieval_id, label, right_topic_id, note, moderator, labelled_at)
        VALUES (%s, %s, %s, %s, %s, now())
        ON CONFLICT (retrieval_id) DO UPDATE SET
            label = EXCLUDED.label, right_topic_id = EXCLUDED.right_topic_id,
            note = EXCLUDED.note, moderator = EXCLUDED.moderator, labelled_at = now()
        RETURNING label, right_topic_id, note, moderator, labelled_at
        """,
        (retrieval_id, label.label, label.right_topic_id, label.note, label.moderator),
    ).fetchone()
    assert row is not None
    return dict(row)


def labelled_scores(conn: DictConn) -> list[dict[str, Any]]:
    """Every label with its retrieval's scorer, best score and first evidence topic."""
    rows = conn.execute(
        """
        SELECT r.scorer, r.top_score, l.label, l.right_topic_id,
               CASE WHEN r.evidence -> 0 ->> 'topic_id' ~ '^[0-9]{1,12}$'
                    THEN (r.evidence -> 0 ->> 'topic_id')::bigint END AS top_topic_id
        FROM sidecar_retrieval_labels l JOIN sidecar_retrievals r ON r.id = l.retrieval_id
        """
    ).fetchall()
    return [dict(r) for r in rows]


def stored_scores(conn: DictConn, scorers: Sequence[str]) -> dict[str, list[float]]:
    """Best scores of every stored retrieval (all zones) of each scorer."""
    if not scorers:
        return {}
    rows = conn.execute(
        "SELECT scorer, array_agg(top_score) AS scores FROM sidecar_retrievals"
        " WHERE scorer = ANY(%s) AND top_score IS NOT NULL GROUP BY scorer",
        (list(scorers),),
    ).fetchall()
    return {r["scorer"]: [float(s) for s in r["scores"]] for r in rows}

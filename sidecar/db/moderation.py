"""SQL of the moderator review: the review list, one retrieval, labels, calibration inputs.

Reads ``sidecar_retrievals`` (written by :mod:`sidecar.db.retrievals`) and reads and writes
``sidecar_retrieval_labels``. Rows come back as the frozen dataclasses below.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, LiteralString, Protocol

from psycopg import sql

from sidecar.core.zones import Zone
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.db.rows import fetch_all, fetch_one

# The zones a moderator reviews: the answers held back or hedged.
REVIEW_ZONES = (Zone.ABSTAIN, Zone.CAUTIOUS)

# The first evidence post's title, only while that post is public (it may have become private
# since the retrieval was stored).
_TOP_TITLE: LiteralString = (
    "CASE WHEN EXISTS (SELECT 1 FROM posts p" + PUBLIC_JOINS
    + " WHERE p.id = CASE WHEN r.evidence -> 0 ->> 'post_id' ~ '^[0-9]{1,12}$'"
    " THEN (r.evidence -> 0 ->> 'post_id')::bigint END AND " + PUBLIC_WHERE
    + ") THEN r.evidence -> 0 ->> 'title' END"
)
# Why the zone was given, as the stored trace's zone step said it: which score, against which
# thresholds (calibrated on the forum or the settings'); none when the input gate decided.
_ZONE_REASON: LiteralString = (
    "(SELECT s -> 'detail' ->> 'reason' FROM jsonb_array_elements(CASE WHEN"
    " jsonb_typeof(r.trace) = 'array' THEN r.trace ELSE '[]'::jsonb END) AS s"
    " WHERE s ->> 'step' = 'zone' LIMIT 1)"
)
_ITEM = sql.SQL("""
    r.id, r.created_at, r.zone, r.query, r.query_source, r.gate_reason, r.scorer, r.top_score,
    r.locale, jsonb_array_length(r.evidence) AS evidence_count,
    """ + _TOP_TITLE + """ AS top_title,
    """ + _ZONE_REASON + """ AS zone_reason,
    l.label, l.right_topic_id, l.note, l.moderator, l.labelled_at
""")
_FROM = sql.SQL(
    " FROM sidecar_retrievals r LEFT JOIN sidecar_retrieval_labels l ON l.retrieval_id = r.id"
)


class ReviewFilter(Protocol):
    """What the review list is filtered by (``sidecar.moderation.models.ReviewFilters``)."""

    @property
    def zone(self) -> str | None: ...
    @property
    def labelled(self) -> str | None: ...
    @property
    def label(self) -> str | None: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def scorer(self) -> str | None: ...
    @property
    def date_from(self) -> date | None: ...
    @property
    def date_to(self) -> date | None: ...
    @property
    def q(self) -> str | None: ...
    @property
    def page(self) -> int: ...
    @property
    def per_page(self) -> int: ...


@dataclass(frozen=True)
class ReviewItem:
    """One row of the review list: a retrieval and its label (the label's fields None if none)."""

    id: uuid.UUID
    created_at: datetime
    zone: Zone
    query: str
    query_source: str
    gate_reason: str | None
    scorer: str
    top_score: float | None
    locale: str | None
    evidence_count: int
    top_title: str | None
    zone_reason: str | None  # which score decided, against which thresholds
    label: str | None
    right_topic_id: int | None
    note: str | None
    moderator: str | None
    labelled_at: datetime | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "zone", Zone(self.zone))


@dataclass(frozen=True)
class ReviewDetail(ReviewItem):
    """One retrieval with everything stored about it (jsonb columns as Python lists)."""

    conversation: Any
    scores: Any
    evidence: Any
    candidates: Any
    trace: Any


@dataclass(frozen=True, slots=True)
class ReviewCounts:
    """Abstain and cautious retrievals, labelled and not (the list's header)."""

    abstain: int
    cautious: int
    labelled: int
    unlabelled: int


@dataclass(frozen=True, slots=True)
class StoredLabel:
    """A label as stored."""

    label: str
    right_topic_id: int | None
    note: str | None
    moderator: str | None
    labelled_at: datetime


@dataclass(frozen=True, slots=True)
class LabelledRetrieval:
    """A label with its retrieval's scorer, best score and first evidence topic."""

    scorer: str
    top_score: float | None
    label: str
    right_topic_id: int | None
    top_topic_id: int | None


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _day(d: date) -> datetime:
    return datetime.combine(d, time.min, tzinfo=UTC)


def _where(f: ReviewFilter) -> tuple[sql.Composable, list[Any]]:
    clauses: list[sql.Composable] = []
    params: list[Any] = []
    if f.zone or not f.outcome:  # asks of one outcome: in every zone (answers are normal's)
        clauses.append(sql.SQL("r.zone = ANY(%s)"))
        params.append([f.zone] if f.zone else list(REVIEW_ZONES))
    if f.outcome:
        clauses.append(sql.SQL("EXISTS (SELECT 1 FROM sidecar_answers a"
                               " WHERE a.retrieval_id = r.id AND a.outcome = %s)"))
        params.append(f.outcome)
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


def list_review(conn: DictConn, filters: ReviewFilter) -> tuple[list[ReviewItem], int]:
    """One page of abstain/cautious retrievals (newest first) and the total matching."""
    where, params = _where(filters)
    total_row = conn.execute(sql.SQL("SELECT count(*) AS n") + _FROM + where, params).fetchone()
    items = fetch_all(
        conn, ReviewItem,
        sql.SQL("SELECT ") + _ITEM + _FROM + where
        + sql.SQL(" ORDER BY r.created_at DESC, r.id DESC LIMIT %s OFFSET %s"),
        [*params, filters.per_page, (filters.page - 1) * filters.per_page],
    )
    return items, int(total_row["n"]) if total_row else 0


def get_review(conn: DictConn, retrieval_id: uuid.UUID) -> ReviewDetail | None:
    """One retrieval with everything stored about it and its label."""
    return fetch_one(
        conn, ReviewDetail,
        sql.SQL("SELECT ") + _ITEM
        + sql.SQL(", r.conversation, r.scores, r.evidence, r.candidates, r.trace") + _FROM
        + sql.SQL(" WHERE r.id = %s"),
        (retrieval_id,),
    )


def evidence_of(conn: DictConn, retrieval_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Any]:
    """The stored evidence of some retrievals (to re-check what their answers cite)."""
    if not retrieval_ids:
        return {}
    rows = conn.execute("SELECT id, evidence FROM sidecar_retrievals WHERE id = ANY(%s)",
                        (list(retrieval_ids),)).fetchall()
    return {r["id"]: r["evidence"] for r in rows}


def review_counts(conn: DictConn) -> ReviewCounts:
    """Abstain and cautious retrievals, labelled and not (the list's header)."""
    counts = fetch_one(conn, ReviewCounts, sql.SQL(
        "SELECT count(*) FILTER (WHERE r.zone = 'abstain') AS abstain,"
        " count(*) FILTER (WHERE r.zone = 'cautious') AS cautious,"
        " count(l.retrieval_id) AS labelled, count(*) - count(l.retrieval_id) AS unlabelled"
    ) + _FROM + sql.SQL(" WHERE r.zone = ANY(%s)"), (list(REVIEW_ZONES),))
    assert counts is not None  # an aggregate always has its row
    return counts


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


def upsert_label(conn: DictConn, retrieval_id: uuid.UUID, *, label: str,
                 right_topic_id: int | None, note: str | None,
                 moderator: str | None) -> StoredLabel:
    """Store (or replace) the label of a retrieval."""
    stored = fetch_one(
        conn, StoredLabel,
        """
        INSERT INTO sidecar_retrieval_labels
            (retrieval_id, label, right_topic_id, note, moderator, labelled_at)
        VALUES (%s, %s, %s, %s, %s, now())
        ON CONFLICT (retrieval_id) DO UPDATE SET
            label = EXCLUDED.label, right_topic_id = EXCLUDED.right_topic_id,
            note = EXCLUDED.note, moderator = EXCLUDED.moderator, labelled_at = now()
        RETURNING label, right_topic_id, note, moderator, labelled_at
        """,
        (retrieval_id, label, right_topic_id, note, moderator),
    )
    assert stored is not None
    return stored


def labelled_scores(conn: DictConn) -> list[LabelledRetrieval]:
    """Every label with its retrieval's scorer, best score and first evidence topic."""
    return fetch_all(
        conn, LabelledRetrieval,
        """
        SELECT r.scorer, r.top_score, l.label, l.right_topic_id,
               CASE WHEN r.evidence -> 0 ->> 'topic_id' ~ '^[0-9]{1,12}$'
                    THEN (r.evidence -> 0 ->> 'topic_id')::bigint END AS top_topic_id
        FROM sidecar_retrieval_labels l JOIN sidecar_retrievals r ON r.id = l.retrieval_id
        """,
    )


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

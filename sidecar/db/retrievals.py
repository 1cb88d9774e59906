"""The ``sidecar_retrievals`` table: one row per ``POST /v1/retrieve`` answer.

Written by the retrieval pipeline (:func:`insert_retrieval`); read by the citation sanitizer
(:func:`get_retrieval`, which resolves ``[[n]]`` against the row's ``evidence``) and by the
moderator review (:func:`list_retrievals`). The schema is migration ``sidecar/0003_retrievals``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from sidecar.db.pool import DictConn
from sidecar.db.rows import fetch_all, fetch_one

_COLUMNS = sql.SQL(
    "id, created_at, conversation, query, query_source, locale, zone, gate_reason, scorer,"
    " top_score, scores, evidence, candidates, trace, asker"
)


@dataclass(frozen=True)
class RetrievalRow:
    """What one retrieval stores (see the migration for the meaning of each column).

    ``evidence`` is exactly the list returned to the caller: ``[{"n", "topic_id", "title",
    "post_id", "post_number", "url", "excerpt", "score", "neighbours": [...]}]`` with ``n`` from 1.
    """

    id: uuid.UUID
    conversation: list[dict[str, Any]]
    query: str
    query_source: str
    zone: str
    scorer: str
    locale: str | None = None
    gate_reason: str | None = None
    top_score: float | None = None
    scores: list[float] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    asker: str | None = None  # the forum's opaque id of who asked (migration 0008)
    # An unanswered question's query embedding and its model (migration 0010): written, never
    # read back with the row (sidecar.db.answers.gap_questions reads them).
    gap_vector: list[float] | None = field(default=None, repr=False)
    gap_model: str | None = None


@dataclass(frozen=True, kw_only=True)
class StoredRetrieval(RetrievalRow):
    """A stored retrieval: what was written, and when."""

    created_at: datetime


def get_retrieval(conn: DictConn, retrieval_id: uuid.UUID | str) -> StoredRetrieval | None:
    """One stored retrieval, or None if there is no such row.

    This is the function ``/v1/sanitize`` uses: ``row.evidence`` is the list of numbered
    evidence items (``n`` from 1) returned to the caller, each with ``topic_id``, ``post_id``,
    ``post_number``, ``title`` and ``url``; jsonb columns come back as Python lists/dicts. A
    malformed id (not a UUID) also gives None, so callers answer "not found" instead of failing.
    """
    try:
        key = retrieval_id if isinstance(retrieval_id, uuid.UUID) else uuid.UUID(str(retrieval_id))
    except ValueError:
        return None
    return fetch_one(
        conn, StoredRetrieval,
        sql.SQL("SELECT {cols} FROM sidecar_retrievals WHERE id = %s").format(cols=_COLUMNS),
        (key,),
    )


def insert_retrieval(conn: DictConn, row: RetrievalRow) -> None:
    """Store one retrieval (the caller's transaction commits it)."""
    conn.execute(
        """
        INSERT INTO sidecar_retrievals (id, conversation, query, query_source, locale, zone,
                                        gate_reason, scorer, top_score, scores, evidence,
                                        candidates, trace, asker, gap_vector, gap_model)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """,
        (row.id, Jsonb(row.conversation), row.query, row.query_source, row.locale, row.zone,
         row.gate_reason, row.scorer, row.top_score, Jsonb(row.scores), Jsonb(row.evidence),
         Jsonb(row.candidates), Jsonb(row.trace), row.asker, row.gap_vector, row.gap_model),
    )


def list_retrievals(
    conn: DictConn,
    *,
    zones: tuple[str, ...] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[StoredRetrieval]:
    """Stored retrievals, newest first, optionally only some zones and a time window."""
    where: list[sql.Composable] = []
    params: list[Any] = []
    if zones:
        where.append(sql.SQL("zone = ANY(%s)"))
        params.append(list(zones))
    if since is not None:
        where.append(sql.SQL("created_at >= %s"))
        params.append(since)
    if until is not None:
        where.append(sql.SQL("created_at < %s"))
        params.append(until)
    clause = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL("")
    return fetch_all(
        conn, StoredRetrieval,
        sql.SQL("SELECT {cols} FROM sidecar_retrievals{where}"
                " ORDER BY created_at DESC, id LIMIT %s OFFSET %s").format(
            cols=_COLUMNS, where=clause),
        (*params, limit, offset),
    )


def purge_retrievals(conn: DictConn, older_than_days: int) -> int:
    """Delete unlabelled retrievals older than ``older_than_days``; returns how many went.

    Labelled ones stay: they are the moderators' calibration data. A sanitize call for a purged
    retrieval answers 404, which is right: its evidence is too old to cite.
    """
    if older_than_days < 1:
        raise ValueError("older_than_days must be >= 1")
    cur = conn.execute(
        "DELETE FROM sidecar_retrievals r WHERE r.created_at < now() - make_interval(days => %s)"
        " AND NOT EXISTS (SELECT 1 FROM sidecar_retrieval_labels l WHERE l.retrieval_id = r.id)",
        (older_than_days,),
    )
    return cur.rowcount

"""The ask log (``sidecar_answers``) and the unanswered questions' vectors (migration 0010).

Written by the answer service and the sanitizer (:func:`insert_answer`, :func:`mark_gap`); read
by the moderator review (:func:`answers_of`, :func:`outcome_counts`) and the content-gap view
(:func:`gap_questions`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from sidecar.db.pool import DictConn
from sidecar.db.rows import fetch_all

_COLUMNS = sql.SQL(
    "id, retrieval_id, created_at, source, outcome, failure_stage, failure, llm, model, streamed,"
    " answer, cited_post_ids, removed, first_token_ms, total_ms, prompt_tokens, reply_tokens"
)


@dataclass(frozen=True)
class AnswerRow:
    """One ask: what the member was shown, how it ended, and what it cost."""

    id: uuid.UUID
    retrieval_id: uuid.UUID
    source: str  # answer | sanitize
    outcome: str  # answered | no_answer | abstained | failed | cancelled
    answer: str = ""
    failure_stage: str | None = None
    failure: str | None = None
    llm: str | None = None
    model: str | None = None
    streamed: bool = False
    cited_post_ids: list[int] = field(default_factory=list)
    removed: dict[str, Any] = field(default_factory=dict)
    first_token_ms: float | None = None
    total_ms: float | None = None
    prompt_tokens: int | None = None
    reply_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class StoredAnswer(AnswerRow):
    """A stored ask, and when."""

    created_at: datetime


@dataclass(frozen=True)
class GapQuestion:
    """A question the forum did not answer, with its query's embedding."""

    retrieval_id: uuid.UUID
    created_at: datetime
    query: str
    zone: str
    outcome: str | None  # the ask's, when it was asked for an answer
    vector: list[float]


def insert_answer(conn: DictConn, row: AnswerRow) -> None:
    """Store one ask (the caller's transaction commits it)."""
    conn.execute(
        """
        INSERT INTO sidecar_answers (id, retrieval_id, source, outcome, failure_stage, failure,
                                     llm, model, streamed, answer, cited_post_ids, removed,
                                     first_token_ms, total_ms, prompt_tokens, reply_tokens)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """,
        (row.id, row.retrieval_id, row.source, row.outcome, row.failure_stage, row.failure,
         row.llm, row.model, row.streamed, row.answer, list(row.cited_post_ids),
         Jsonb(row.removed), row.first_token_ms, row.total_ms, row.prompt_tokens,
         row.reply_tokens),
    )


def mark_gap(conn: DictConn, retrieval_id: uuid.UUID, vector: Sequence[float],
             model: str) -> None:
    """Keep the query's embedding of a retrieval whose question went unanswered."""
    conn.execute("UPDATE sidecar_retrievals SET gap_vector = %s, gap_model = %s WHERE id = %s",
                 ([float(x) for x in vector], model, retrieval_id))


def answers_of(conn: DictConn, retrieval_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID,
                                                                          list[StoredAnswer]]:
    """The asks of some retrievals, oldest first, by retrieval."""
    if not retrieval_ids:
        return {}
    rows = fetch_all(
        conn, StoredAnswer,
        sql.SQL("SELECT {cols} FROM sidecar_answers WHERE retrieval_id = ANY(%s)"
                " ORDER BY created_at, id").format(cols=_COLUMNS),
        (list(retrieval_ids),))
    out: dict[uuid.UUID, list[StoredAnswer]] = {}
    for row in rows:
        out.setdefault(row.retrieval_id, []).append(row)
    return out


def outcome_counts(conn: DictConn, since: datetime | None = None) -> dict[str, int]:
    """Asks by outcome (since a moment, or all kept)."""
    rows = conn.execute(
        "SELECT outcome, count(*) AS n FROM sidecar_answers"
        " WHERE %s::timestamptz IS NULL OR created_at >= %s GROUP BY outcome",
        (since, since)).fetchall()
    return {r["outcome"]: int(r["n"]) for r in rows}


def gap_questions(conn: DictConn, model: str, since: datetime, until: datetime,
                  limit: int) -> list[GapQuestion]:
    """The unanswered questions of a period embedded by ``model``, newest first.

    A retrieval keeps its vector when its zone abstained (``/v1/retrieve`` or ``/v1/answer``)
    or its ask ended ``no_answer``; one whose latest ask since ended otherwise (a later
    ``/v1/sanitize`` that answered) is no gap.
    """
    return fetch_all(
        conn, GapQuestion,
        """
        SELECT r.id AS retrieval_id, r.created_at, r.query, r.zone, a.outcome,
               r.gap_vector AS vector
          FROM sidecar_retrievals r
          LEFT JOIN LATERAL (SELECT outcome FROM sidecar_answers
                              WHERE retrieval_id = r.id
                              ORDER BY created_at DESC, id DESC LIMIT 1) a ON true
         WHERE r.gap_vector IS NOT NULL AND r.gap_model = %s
           AND r.created_at >= %s AND r.created_at < %s
           AND (a.outcome IS NULL OR a.outcome IN ('abstained', 'no_answer'))
         ORDER BY r.created_at DESC, r.id LIMIT %s
        """,
        (model, since, until, limit))
